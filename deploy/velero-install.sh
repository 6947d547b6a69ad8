#!/bin/sh
# Installing velero-wasm with the velero CLI. Every command here is checked by tests/install.rs (the
# image reference, the plugin directory, the environment names); replace IMAGE with the registry you
# pushed the image to (`make image` builds it).
#
#   sh velero-install.sh new        a new Velero installation with velero-wasm
#   sh velero-install.sh existing   velero-wasm added to a Velero already installed
#
# The two are exclusive: each adds the image as an init container, and a second one of the same
# image would copy the plugin twice.
set -eu

IMAGE=registry.example.com/velero-wasm/velero-wasm:0.1.0

case "${1:-}" in
new)
    # velero-wasm beside the object-store plugin of your provider. `--plugins` takes a
    # comma-separated list of images; each becomes an init container that copies its plugin into
    # Velero's plugin directory (mounted at /target in the init container).
    velero install \
        --provider aws \
        --plugins "velero/velero-plugin-for-aws:v1.13.1,$IMAGE" \
        --bucket my-backups \
        --secret-file ./credentials-velero
    ;;
existing)
    # Add the init container to the Velero Deployment. `--confirm` answers the prompt that the
    # Velero server pod restarts (its ongoing backups and restores fail): run it between them.
    velero plugin add --confirm "$IMAGE"
    ;;
*)
    echo "usage: $0 new|existing (a new Velero installation, or one already installed)" >&2
    exit 2
    ;;
esac

# Choose the stock modules (default: all). Beside upstream's kubevirt-velero-plugin, for instance, load
# only HyperShift's (docs/migration.md says which names clash).
kubectl -n velero set env deployment/velero VELERO_WASM_STOCK=hcp,agent

# Optional: export call metrics to an OpenTelemetry collector (OTLP/HTTP; README "Metrics").
#   kubectl -n velero set env deployment/velero OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector.observability:4318

# Velero 1.14 refuses plugins that list ItemBlockAction: list every other kind.
kubectl -n velero set env deployment/velero \
    VELERO_WASM_KINDS=BackupItemAction,BackupItemActionV2,RestoreItemAction,RestoreItemActionV2,DeleteItemAction
