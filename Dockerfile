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

# ---------------------------------------------------------------- builder ---
FROM python:3.11-slim-bookworm AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /src

# Dependencies first, from pyproject.toml alone, so editing the code does not
# rebuild them (the project's own version is read from ahp_server/__init__.py):
# project.dependencies plus the "cluster" extra (asyncpg, nats-py), which the
# final stage installs as ahp-server[cluster].
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['cluster']))" > /tmp/requirements.txt \
    && pip wheel --wheel-dir /wheels --requirement /tmp/requirements.txt

COPY ahp_server ./ahp_server
# The project's wheel, and the one requirement the final stage installs: that
# wheel with the "cluster" extra, as a direct reference (a requirements file,
# so every package installed is pinned to a wheel built here).
RUN pip wheel --no-deps --wheel-dir /wheels . \
    && set -- /wheels/ahp_server-*.whl \
    && echo "ahp-server[cluster] @ file://$1" > /wheels/ahp-server.txt

# ------------------------------------------------------------------ final ---
FROM python:3.11-slim-bookworm

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
# ahp-server.txt names the project's wheel with the "cluster" extra; the
# import proves asyncpg and nats-py are in.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels --requirement /wheels/ahp-server.txt \
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
