# notifier: Python 3.11 slim plus a Java 17 runtime (PySpark's backtest needs it).
FROM python:3.11-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY notifier ./notifier
COPY templates ./templates
COPY rules.yaml ./
COPY examples ./examples
# Editable install: the templates/ directory and rules.yaml stay where the code finds them.
RUN pip install -e .

# A config mounted at /etc/notifier/config.yaml finds the default rules beside it (mount your
# own rules.yaml over it to change them); set `data_dir: /data` and `api: {host: 0.0.0.0}` in it
# (see examples/docker.yaml).
RUN useradd --system --uid 10001 --home-dir /data notifier \
    && mkdir -p /data /etc/notifier \
    && cp /app/rules.yaml /etc/notifier/rules.yaml \
    && chown notifier /data
USER notifier
VOLUME ["/data"]
EXPOSE 8000

ENTRYPOINT ["notifier", "run"]
CMD ["--config", "/etc/notifier/config.yaml"]
