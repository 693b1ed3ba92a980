# The queue-manager operator image: `make image` (docker build -t ghcr.io/queue-manager/queue-manager:<version> .).
# It holds what `qm run` needs and nothing else: the base dependencies pinned with hashes in requirements.lock
# (`make lock`), no simulator (matplotlib, numpy) and no dev-cluster PKI (cryptography); the sim and
# dev-cluster extras of pyproject.toml are for workstations. Runs `qm run` as a non-root user; the Deployment
# (manifests/deployment) mounts the root filesystem read-only.
FROM python:3.11-slim AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.lock ./
RUN python -m venv /opt/venv && /opt/venv/bin/pip install --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY fairshare ./fairshare
COPY queue_manager ./queue_manager
COPY simulations ./simulations
COPY qm ./qm
COPY ledger ./ledger
COPY devcluster ./devcluster
# --no-deps: every dependency is already installed, at the locked version.
RUN /opt/venv/bin/pip install --no-deps . \
 && /opt/venv/bin/python -c "import importlib.util as u, sys; bad = [m for m in ('matplotlib', 'numpy', 'cryptography') if u.find_spec(m)]; sys.exit(f'simulator or dev dependencies in the image: {bad}' if bad else 0)"

FROM python:3.11-slim
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="queue-manager" \
      org.opencontainers.image.description="QuotaPolicy operator for Kueue: gradual quota shifts, history-based fair share, experiment preemption" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /opt/venv /opt/venv
RUN groupadd --system --gid 10001 qm && useradd --system --uid 10001 --gid qm --no-create-home qm
USER 10001:10001
EXPOSE 8080 9090
ENTRYPOINT ["qm"]
# Listen on all interfaces in a container (the local default is 127.0.0.1); the Deployment passes its own args.
CMD ["run", "--bind-address=0.0.0.0", "--metrics-port=9090", "--health-port=8080", "--log-format=json"]
