"""The throw-away PKI: chains, identities and SANs as kube-apiserver reads them."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from devcluster.pki import CertificateAuthority, service_account_keys


def _cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def test_a_client_cert_carries_the_user_as_cn_and_the_groups_as_o_and_is_signed_by_its_ca() -> None:
    ca = CertificateAuthority("client-ca")
    pair = ca.issue("alice", ["team-a", "system:authenticated"], client=True)
    cert = _cert(pair.cert_pem)
    subject = {
        "cn": [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)],
        "o": [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)],
        "usage": list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value),
    }
    assert subject == {
        "cn": ["alice"],
        "o": ["team-a", "system:authenticated"],
        "usage": [ExtendedKeyUsageOID.CLIENT_AUTH],
    }
    cert.verify_directly_issued_by(_cert(ca.cert_pem))


def test_a_serving_cert_names_loopback_in_its_sans() -> None:
    ca = CertificateAuthority("serving-ca")
    cert = _cert(ca.issue("x", ip_addresses=["127.0.0.1"], dns_names=["localhost"], server=True).cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert (san.get_values_for_type(x509.DNSName), san.get_values_for_type(x509.IPAddress)) == (
        ["localhost"],
        [ipaddress.ip_address("127.0.0.1")],
    )


def test_a_cert_from_another_ca_does_not_verify() -> None:
    pair = CertificateAuthority("a").issue("alice", client=True)
    with pytest.raises((ValueError, TypeError)):
        _cert(pair.cert_pem).verify_directly_issued_by(_cert(CertificateAuthority("b").cert_pem))


def test_a_reloaded_ca_issues_certs_that_verify_against_the_original(tmp_path: Path) -> None:
    ca = CertificateAuthority("client-ca")
    crt, key = ca.write(tmp_path, "ca")
    again = CertificateAuthority.load(crt.read_bytes(), key.read_bytes())
    _cert(again.issue("bob", client=True).cert_pem).verify_directly_issued_by(_cert(ca.cert_pem))
    assert key.stat().st_mode & 0o077 == 0


def test_service_account_keys_are_a_matching_ec_pair() -> None:
    from cryptography.hazmat.primitives import serialization

    private_pem, public_pem = service_account_keys()
    private = serialization.load_pem_private_key(private_pem, password=None)
    public = serialization.load_pem_public_key(public_pem)
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    assert private.public_key().public_numbers() == public.public_numbers()  # type: ignore[union-attr]
