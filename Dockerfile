# awc in a container (README, "In a container, on Kubernetes with KEDA").
#
#   buildah bud --format docker -t awc .          # or: docker build -t awc .
#   docker run --rm -e DATABASE_URL_FILE=... awc loop
#
# BASE is any Debian-like image with python3 (≥ 3.11) and its venv module;
# the default is the official slim image. To build where no registry is
# reachable, make a base from Debian's packages and name it here:
#   --build-arg BASE=localhost/awc-base:bookworm   (see tests/test_container.py)
# EXTRAS are the optional parts installed with awc: s3 (an s3:// store) and
# ui (the console) by default.
ARG BASE=docker.io/library/python:3.12-slim-bookworm

FROM ${BASE} AS build
ARG EXTRAS=s3,ui
WORKDIR /src
COPY pyproject.toml README.md ./
COPY tick ./tick
COPY handlers ./handlers
COPY migrations ./migrations
# A wheel first, then a venv from it: the image holds the installed package
# and its dependencies, never the source tree. Behind a TLS-intercepting
# proxy, hand pip its CA bundle as a build secret (never a layer):
#   --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt
RUN --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
 && export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
 && python3 -m venv /opt/awc \
 && /opt/awc/bin/pip wheel --quiet --no-deps -w /tmp/wheels . \
 && /opt/awc/bin/pip install --quiet "$(ls /tmp/wheels/awc_worker-*.whl)[${EXTRAS}]"

FROM ${BASE}
COPY --from=build /opt/awc /opt/awc
# A fixed, unprivileged uid, so Kubernetes' runAsNonRoot can check it.
RUN useradd --no-log-init --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin awc \
 && install -d -o awc -g awc -m 0750 /var/lib/awc
ENV PATH=/opt/awc/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    AWC_LOG_FORMAT=json \
    AWC_METRICS_PORT=9464 \
    AWC_METRICS_ADDRESS=0.0.0.0
# No secret is baked in: the connection string arrives at run time, in
# DATABASE_URL or (better) a mounted file named by AWC_DATABASE_URL_FILE.
USER 10001
WORKDIR /var/lib/awc
EXPOSE 9464
# The loop's own /healthz (the default command). A one-off command run from
# this image (a tick, a migrate) exits well within the start period.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('AWC_METRICS_PORT', '9464'), timeout=4)"]
# awc drains on SIGTERM: running jobs get AWC_STOP_GRACE_SECS, the rest are
# released, and it exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["awc"]
CMD ["loop"]
