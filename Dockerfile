# agentd's container images, two targets:
#
#   agentd       the default: the static agentd binary on distroless, run as
#                UID 65532 (non-root), with CA certificates and nothing else
#   agentd-node  the same binary on Node.js, for MCP servers started with
#                npx (bridge.allowed_commands: [npx]); non-root too
#
# Both serve the web console at /console/, built in the console stage and
# embedded in the binary.
#
#   make image        docker build --target agentd (VERSION, COMMIT from git)
#   make image-node   docker build --target agentd-node
#
# Both run `agentd serve` with /etc/agentd/agentd.yaml (AGENTD_CONFIG), which
# listens on every interface: mount your own file there (the Helm chart in
# deploy/helm/agentd does). Without authentication (auth.*) agentd refuses
# to listen beyond loopback unless AGENTD_INSECURE=1. `docker run IMAGE
# bridge` runs the bridge instead; `docker run IMAGE version` prints the
# build. deploy/image_test.go checks this file: the build command below
# builds a static binary that reports its version, and the rules of
# dockerfileRules hold.

# The web console agentd embeds (/console/), built by the same script as
# make console, with the npm packages package-lock.json pins.
FROM node:24.11.1-bookworm-slim AS console
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error
COPY scripts/console.sh scripts/
COPY console console
COPY gen/ts gen/ts
RUN sh scripts/console.sh

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
COPY --from=console /src/internal/console/dist internal/console/dist
ARG VERSION=dev
ARG COMMIT=unknown
# make build's LDFLAGS, with the version and commit from the build args.
RUN CGO_ENABLED=0 go build -ldflags "-X github.com/agentd/agentd/internal/version.Version=${VERSION} -X github.com/agentd/agentd/internal/version.Commit=${COMMIT}" -o /out/agentd ./cmd/agentd
# The state directory (SQLite's agentd.db), owned by the runtime user.
RUN mkdir -p /out/state

FROM node:24.11.1-bookworm-slim AS agentd-node
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/agentd /usr/local/bin/agentd
COPY --from=build --chown=65532:65532 /out/state /var/lib/agentd
COPY deploy/image/agentd.yaml /etc/agentd/agentd.yaml
# npm keeps its cache under HOME; /tmp stays writable under a read-only
# root filesystem (the chart mounts an emptyDir there).
ENV AGENTD_CONFIG=/etc/agentd/agentd.yaml HOME=/tmp NPM_CONFIG_UPDATE_NOTIFIER=false
USER 65532:65532
EXPOSE 7070 7071 9464
ENTRYPOINT ["/usr/local/bin/agentd"]
CMD ["serve"]

FROM gcr.io/distroless/static-debian12:nonroot AS agentd
COPY --from=build /out/agentd /usr/local/bin/agentd
COPY --from=build --chown=65532:65532 /out/state /var/lib/agentd
COPY deploy/image/agentd.yaml /etc/agentd/agentd.yaml
ENV AGENTD_CONFIG=/etc/agentd/agentd.yaml
USER 65532:65532
EXPOSE 7070 7071 9464
ENTRYPOINT ["/usr/local/bin/agentd"]
CMD ["serve"]
