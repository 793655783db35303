# notifier: the wheel, built in one stage and installed (not editable) in a Python 3.11 slim
# runtime with a Java 17 runtime (PySpark's backtest needs it).
#
#   docker build -t notifier .
#   docker run -v $PWD/examples/docker.yaml:/etc/notifier/config.yaml -v notifier-data:/data \
#       -p 8000:8000 -e KAFKA_BOOTSTRAP=broker:9092 \
#       -e SLACK_WEBHOOK_URL=https://hooks.slack.com/services/... notifier

# Bookworm: the Debian release whose archive has openjdk-17.
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# What the wheel is built from: the package, plus the default rules, the templates and the
# examples that pyproject.toml packs into it (notifier/bundled/).
COPY pyproject.toml README.md rules.yaml ./
COPY notifier ./notifier
COPY templates ./templates
COPY examples ./examples
RUN pip wheel --no-deps --wheel-dir /dist .

FROM python:3.11-slim-bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY --from=build /dist/ /tmp/dist/
RUN pip install /tmp/dist/notifier-*.whl && rm -rf /tmp/dist

# A config mounted at /etc/notifier/config.yaml finds the default rules beside it (mount your own
# rules.yaml over it to change them; a config that names no rules file and has none beside it
# uses the ones inside the package). Set `data_dir: /data` and `api: {host: 0.0.0.0}` in it (see
# examples/docker.yaml, also in the image: `notifier examples docker.yaml`).
RUN useradd --system --uid 10001 --home-dir /data notifier \
    && mkdir -p /data /etc/notifier \
    && cp "$(notifier examples rules.yaml)" /etc/notifier/rules.yaml \
    && notifier check /etc/notifier/rules.yaml \
    && chown notifier /data
USER notifier
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8000

# Healthy while the API answers /healthz (the process is up and serving; whether the clusters
# are scanned is /readyz's business). Python, not curl: the slim image has no curl. Set
# NOTIFIER_HEALTHCHECK_URL when the config moves the API (another port, https: the certificate
# is not checked on this loopback call).
ENV NOTIFIER_HEALTHCHECK_URL=http://127.0.0.1:8000/healthz
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, ssl, urllib.request; urllib.request.urlopen(os.environ['NOTIFIER_HEALTHCHECK_URL'], timeout=4, context=ssl._create_unverified_context())"]

ENTRYPOINT ["notifier", "run"]
CMD ["--config", "/etc/notifier/config.yaml"]
