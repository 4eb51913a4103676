# syntax=docker/dockerfile:1
# ahp-server container image. docs/deploy.md explains how to run it.
#
#   docker build -t ahp-server .
#   docker run -d -p 127.0.0.1:8765:8765 -v ahp-data:/data -v ahp-work:/workspace \
#     -e AHP_SERVER_TOKEN="$(openssl rand -hex 32)" ahp-server
#
# Two stages: "builder" turns the project and its dependencies into wheels;
# the final stage installs only those wheels (no compiler, no pip cache, no
# source tree) and runs as an unprivileged user with a fixed UID/GID.
#
# The image carries the "cluster" extra (asyncpg and nats-py), so one image
# runs every mode: the embedded SQLite default, the PostgreSQL store
# (AHP_SERVER_STORE) and cluster mode (AHP_SERVER_BUS; docker-compose.cluster.yml).
#
# Reproducible: both stages start from the same base image, pinned by the digest
# of its multi-platform index (the tag is for readers; the digest decides), and
# every Python package is the version requirements.lock pins, its file checked
# against the lock's sha256 (pip --require-hashes). Two builds of one commit get
# the same packages. docs/deploy.md "Reproducible builds" refreshes both.

# ---------------------------------------------------------------- builder ---
FROM python:3.11.16-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /src

# Dependencies first, from the lock alone, so editing the code does not rebuild
# them: project.dependencies plus the "cluster" extra (asyncpg, nats-py) and
# everything they need, each at its locked version, each file checked against
# its locked sha256 (a file that does not match fails the build).
COPY requirements.lock ./
RUN pip wheel --require-hashes --wheel-dir /wheels --requirement requirements.lock

COPY pyproject.toml README.md ./
COPY ahp_server ./ahp_server
# The project's wheel, and the one requirement the final stage installs: that
# wheel with the "cluster" extra, as a direct reference (a requirements file,
# so every package installed is pinned to a wheel built here).
RUN pip wheel --no-deps --wheel-dir /wheels . \
    && set -- /wheels/ahp_server-*.whl \
    && echo "ahp-server[cluster] @ file://$1" > /wheels/ahp-server.txt

# ------------------------------------------------------------------ final ---
FROM python:3.11.16-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b

LABEL org.opencontainers.image.title="ahp-server" \
      org.opencontainers.image.description="Agent Host Protocol host (WebSocket)" \
      org.opencontainers.image.licenses="MIT"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore

# Fixed numeric IDs, so volume ownership is predictable across rebuilds and
# hosts. /data (the database) and /workspace (the sessions' files) are created
# here, owned by that user: a fresh named volume mounted on either starts with
# this ownership.
RUN groupadd --system --gid 10001 ahp \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/ahp --create-home \
       --shell /usr/sbin/nologin ahp \
    && mkdir /data /workspace \
    && chown 10001:10001 /data /workspace

# The wheels are bind-mounted from the builder, never copied into a layer.
# ahp-server.txt names the project's wheel with the "cluster" extra; with no
# index, pip can take its dependencies only from /wheels, which holds the
# locked versions and nothing else; pip check proves nothing is missing, the
# import that asyncpg and nats-py are in.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels --requirement /wheels/ahp-server.txt \
    && pip check \
    && python -c "import asyncpg, nats" \
    && ahp-server --version

# Listen on every interface inside the container (the server refuses that
# without AHP_SERVER_TOKEN, which must be given at run time, never baked in),
# keep the database on its volume, let sessions' working directories lie only
# under /workspace (docs/workspace.md "Roots": a host reachable from elsewhere
# has no root unless one is configured), log JSON lines to stdout.
ENV AHP_SERVER_HOST=0.0.0.0 \
    AHP_SERVER_DATA_DIR=/data \
    AHP_SERVER_WORKSPACE_ROOTS=/workspace \
    AHP_SERVER_LOG_FORMAT=json

VOLUME ["/data", "/workspace"]
EXPOSE 8765
WORKDIR /home/ahp
USER 10001:10001

# No curl in slim images: the stdlib does the request. /healthz needs no token.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('AHP_SERVER_PORT', '8765') + '/healthz', timeout=4)"]

# SIGTERM: the server closes WebSockets with 1001, flushes the store, exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["ahp-server"]
CMD ["serve"]
