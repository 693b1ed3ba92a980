# The queue-manager operator image: `docker build -t ghcr.io/queue-manager/queue-manager:0.1.0 .`
# Runs `qm run` as a non-root user; the Deployment (manifests/deployment) mounts the root filesystem read-only.
FROM python:3.11-slim AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pyproject.toml README.md ./
COPY fairshare ./fairshare
COPY queue_manager ./queue_manager
COPY simulations ./simulations
COPY qm ./qm
COPY devcluster ./devcluster
RUN python -m venv /opt/venv && /opt/venv/bin/pip install .

FROM python:3.11-slim
LABEL org.opencontainers.image.title="queue-manager" \
      org.opencontainers.image.description="QuotaPolicy operator for Kueue: gradual quota shifts, history-based fair share, experiment preemption" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 MPLCONFIGDIR=/tmp/matplotlib
COPY --from=build /opt/venv /opt/venv
RUN groupadd --system --gid 10001 qm && useradd --system --uid 10001 --gid qm --no-create-home qm
USER 10001:10001
EXPOSE 8080 9090
ENTRYPOINT ["qm"]
CMD ["run", "--metrics-port=9090", "--health-port=8080", "--log-format=json"]
