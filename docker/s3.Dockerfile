# An S3-compatible object store for trying eddy with buckets: s3s-fs (an S3
# service over a directory; each top-level directory is a bucket), built
# from crates.io at the version the tests pin (scripts/s3-server.sh).
#
#   docker build -f docker/s3.Dockerfile -t eddy-s3 .
FROM rust:1.95-slim-bookworm AS build
RUN cargo install --locked s3s-fs@0.14.1 --features binary --root /usr/local

FROM debian:bookworm-slim
COPY --from=build /usr/local/bin/s3s-fs /usr/local/bin/s3s-fs
RUN useradd --system --uid 10002 --no-create-home --shell /usr/sbin/nologin s3 \
 && mkdir -p /store/lake && chown -R s3:s3 /store
USER s3
VOLUME ["/store"]
EXPOSE 9000
ENTRYPOINT ["s3s-fs", "--host", "0.0.0.0", "--port", "9000"]
CMD ["--access-key", "eddy", "--secret-key", "eddy-secret", "/store"]
