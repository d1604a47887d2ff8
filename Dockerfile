# syntax=docker/dockerfile:1
# One image for every intentledger process; the command picks the process:
#   docker run --rm intentledger:dev migrate                 the schema migrations (one shot)
#   docker run --rm intentledger:dev serve dispatcher        a service: relay, proposal-intake,
#                                                            policy, dispatcher, projection, query,
#                                                            wallet, warehouse
# Configuration is environment only (docs/configuration.md). Checked offline by
# tests/unit/test_dockerfile.py; docker-compose.yml builds it as intentledger:dev.

# Builder: a virtual environment at /opt/venv (the same path in the runtime stage, so its scripts'
# shebangs hold). Dependencies come from wheels only: every pinned dependency ships manylinux
# wheels for amd64 and arm64, so no compiler is needed here and none can reach the runtime image.
FROM python:3.11.14-slim-bookworm AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# The dependency layer changes only with pyproject.toml (its pins are the project's pins, the
# agent client's among them; the client itself, clients/python, is built from the source below).
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(d for d in tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'] if not d.startswith('intentledger-client')))" > requirements.txt \
 && pip install --no-cache-dir --only-binary=:all: --requirement requirements.txt
COPY clients/python/ clients/python/
COPY shared/ shared/
COPY services/ services/
COPY downstreams/ downstreams/
COPY intentledger/ intentledger/
RUN pip install --no-cache-dir --no-deps ./clients/python . \
 && pip check

# Runtime: the interpreter, the venv and the example configuration; nothing else of the source.
FROM python:3.11.14-slim-bookworm AS runtime
LABEL org.opencontainers.image.title="intentledger" \
      org.opencontainers.image.description="Once-per-intent execution of AI agents' tool calls" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed numeric UID/GID, so orchestrators can enforce runAsNonRoot and volumes can be chowned.
RUN groupadd --system --gid 10001 intentledger \
 && useradd --system --no-log-init --uid 10001 --gid 10001 --create-home \
            --home-dir /home/intentledger --shell /usr/sbin/nologin intentledger \
 && install -d -o 10001 -g 10001 -m 0700 /home/intentledger/keys/signing \
 && install -d -o 10001 -g 10001 -m 0755 /home/intentledger/keys/public
# (Mount points of the capability keys, so that a new named volume is the service user's.)
# Root-owned: the service user can run the code and read the configuration, never change them.
COPY --from=builder /opt/venv /opt/venv
COPY config/ /etc/intentledger/
# The settings' defaults point into the source tree, which the image does not have: the example
# tool registry, policy and principals are named here (mount your own and set these to replace them).
# Health endpoints and the query API listen on every interface: a container's loopback is
# unreachable; who may connect is the network's (compose, NetworkPolicy) decision.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    INTENTLEDGER_HOME=/home/intentledger/.intentledger \
    INTENTLEDGER_INTAKE_TOOLS_FILE=/etc/intentledger/tools.example.yaml \
    INTENTLEDGER_INTAKE_PRINCIPALS_FILE=/etc/intentledger/principals.example.yaml \
    INTENTLEDGER_POLICY_TOOLS_FILE=/etc/intentledger/tools.example.yaml \
    INTENTLEDGER_POLICY_POLICY_FILE=/etc/intentledger/policy.example.yaml \
    INTENTLEDGER_POLICY_PRINCIPALS_FILE=/etc/intentledger/principals.example.yaml \
    INTENTLEDGER_DISPATCHER_TOOLS_FILE=/etc/intentledger/tools.example.yaml \
    INTENTLEDGER_DISPATCHER_POLICY_FILE=/etc/intentledger/policy.example.yaml \
    INTENTLEDGER_DISPATCHER_PRINCIPALS_FILE=/etc/intentledger/principals.example.yaml \
    INTENTLEDGER_QUERY_TOOLS_FILE=/etc/intentledger/tools.example.yaml \
    INTENTLEDGER_HEALTH_HOST=0.0.0.0 \
    INTENTLEDGER_HEALTH_PORT=8081 \
    INTENTLEDGER_QUERY_HOST=0.0.0.0
WORKDIR /home/intentledger
USER 10001:10001
# 8081: /healthz and /readyz of every service; 8090: the query API (serve query).
EXPOSE 8081 8090
# Exec form: the service is PID 1 and receives SIGTERM itself (graceful shutdown).
ENTRYPOINT ["intentledger"]
CMD ["serve", "relay"]
