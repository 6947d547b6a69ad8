#!/bin/sh
# Installing velero-wasm with the velero CLI, for Velero 1.14 to 1.18 (docs/install.md: what each
# version needs). Every command here is checked by tests/install.rs (the image reference, the plugin
# directory, the environment names, what runs for each Velero version); replace IMAGE with the
# registry you pushed the image to (`make image` builds it).
#
#   sh velero-install.sh new        a new Velero installation with velero-wasm
#   sh velero-install.sh existing   velero-wasm added to a Velero already installed
#
# The two are exclusive: each adds the image as an init container, and a second one of the same
# image would copy the plugin twice. VELERO_VERSION=1.15.2 (say) overrides the version the script
# finds, for an image whose tag is not a version (a digest, a mirror's own tag).
set -eu

IMAGE=registry.example.com/velero-wasm/velero-wasm:0.1.0
NAMESPACE=velero

# Velero 1.14 refuses a plugin that lists ItemBlockAction (item-block actions arrived in 1.15), so
# there the plugin lists every other kind. From 1.15 on the variable stays unset: set, it would hide
# the item-block actions that work there.
KINDS=BackupItemAction,BackupItemActionV2,RestoreItemAction,RestoreItemActionV2,DeleteItemAction

# The minor version of a Velero version such as v1.14.1 or 1.16.0-rc.1 (14, 16), or nothing.
minor_of() {
    printf '%s\n' "$1" | sed -n 's/^v\{0,1\}1\.\([0-9][0-9]*\)\(\.[0-9].*\)\{0,1\}$/\1/p'
}

# The version of the velero client: `velero version --client-only` prints "Version: v1.16.2".
client_version() {
    velero version --client-only | sed -n 's/^[[:space:]]*Version:[[:space:]]*//p' | head -n 1
}

# The version of the Velero server installed: the tag of the velero container's image.
server_version() {
    image=$(kubectl -n "$NAMESPACE" get deployment velero \
        -o jsonpath='{.spec.template.spec.containers[?(@.name=="velero")].image}')
    case "$image" in
    *@*) echo "" ;; # a digest names no version
    *:*) echo "${image##*:}" ;;
    *) echo "" ;;
    esac
}

case "${1:-}" in
new | existing) ;;
*)
    echo "usage: $0 new|existing (a new Velero installation, or one already installed)" >&2
    exit 2
    ;;
esac

client=$(client_version)
client_minor=$(minor_of "$client")
if [ "$1" = new ]; then
    # `velero install` installs the server of the client's own version.
    server=${VELERO_VERSION:-$client}
else
    server=${VELERO_VERSION:-$(server_version)}
fi
server_minor=$(minor_of "$server")
if [ -z "$server_minor" ]; then
    echo "$0: cannot tell the Velero version (found \"$server\"): set VELERO_VERSION, e.g. VELERO_VERSION=1.16.2" >&2
    exit 2
fi
if [ "$server_minor" -lt 14 ]; then
    echo "$0: Velero $server is older than 1.14, the oldest velero-wasm is checked against (docs/install.md)" >&2
    exit 2
fi

# The variables of the velero container, set by one `kubectl set env`: the stock modules to load
# (default: all; beside upstream's kubevirt-velero-plugin, for instance, load only HyperShift's, as
# here: docs/migration.md says which names clash), and the kinds on Velero 1.14.
# Optional: export call metrics to an OpenTelemetry collector (OTLP/HTTP; docs/operation.md, "Metrics") by
# adding OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector.observability:4318 to the list.
vars=VELERO_WASM_STOCK=hcp,agent
if [ "$server_minor" -eq 14 ]; then
    vars="$vars VELERO_WASM_KINDS=$KINDS"
fi

case "$1" in
new)
    # velero-wasm beside the object-store plugin of your provider. `--plugins` takes a
    # comma-separated list of images; each becomes an init container that copies its plugin into
    # Velero's plugin directory (mounted at /target in the init container). The variables follow at
    # once, before anything runs that a restart could interrupt.
    velero install \
        --provider aws \
        --plugins "velero/velero-plugin-for-aws:v1.13.1,$IMAGE" \
        --bucket my-backups \
        --secret-file ./credentials-velero
    kubectl -n "$NAMESPACE" set env deployment/velero -c velero $vars
    ;;
existing)
    # The Velero server pod restarts once (its ongoing backups and restores fail): run this between
    # them. The rollout is paused while the init container and the variables are added, so that both
    # changes roll out together, and resumed whatever happens.
    kubectl -n "$NAMESPACE" rollout pause deployment/velero
    trap 'kubectl -n "$NAMESPACE" rollout resume deployment/velero' EXIT
    if [ -n "$client_minor" ] && [ "$client_minor" -ge 14 ]; then
        # `--confirm` answers the prompt about that restart (the prompt and the flag came in 1.14).
        velero plugin add --confirm "$IMAGE"
    else
        # A client older than 1.14 neither asks nor knows --confirm.
        echo "velero client $client is older than 1.14: adding the plugin without --confirm" >&2
        velero plugin add "$IMAGE"
    fi
    kubectl -n "$NAMESPACE" set env deployment/velero -c velero $vars
    ;;
esac
