#!/bin/sh
# `make python`: the second language. For the backup, restore and delete kinds, `velero-wasm new --lang
# python --kind KIND` and `velero-wasm new --kind KIND` (Rust) in a scratch directory; the Python
# module's unit tests; both built with `velero-wasm build`; the one suite both generate (the same
# file, its second case overriding the setting `suspend`, which the action reads typed) passes on each,
# and so does a suite of the settings path (an operator's override, a misspelt key, a wrong type);
# an exception the Python backup action does not catch shows its traceback in `run`'s error; then
# `velero-wasm bench` of each and their sizes. Not part of `make test`: componentize-py snapshots an
# interpreter (about a minute) and a debug host compiles the 18 MB component for a minute or two.
#
# componentize-py comes from PyPI into target/python-venv (COMPONENTIZE_PY names another); the Rust
# twin builds offline from Cargo's cache, with the workspace's Cargo.lock.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_BUILD_TARGET:-$(uname -m)-unknown-linux-musl}
cargo build -q -p velero-wasm --target "$target"
bin=$root/target/$target/debug/velero-wasm

if [ -z "${COMPONENTIZE_PY:-}" ]; then
    venv=$root/target/python-venv
    if [ ! -x "$venv/bin/componentize-py" ]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q componentize-py==0.25.1
    fi
    COMPONENTIZE_PY=$venv/bin/componentize-py
fi
export COMPONENTIZE_PY

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

. "$root/tests/settings-suite.sh"

# Fails unless the file $2 (what $1 printed) holds the traceback of the exception that metadata given
# as a list raises in the backup action's `label`.
holds_traceback() {
    holds_lines "$1" "$2" 'Traceback (most recent call last):' ', in label' \
        "AttributeError: 'list' object has no attribute 'get'"
}

# One module of each kind in each language: the same name, hence the same action and the same suite.
for kind in backup restore delete; do
    name=$kind-pvcs
    py=$work/python/$name
    rust=$work/rust/$name
    subject=$([ "$kind" = restore ] && echo restore || echo backup)

    "$bin" new --lang python --kind "$kind" "$py"
    "$bin" new --kind "$kind" "$rust"
    cp "$root/Cargo.lock" "$rust/"
    cmp "$py/tests/suite.yaml" "$rust/tests/suite.yaml"
    echo "== $kind: one suite for both: $(grep -c '^  - name:' "$py/tests/suite.yaml") case(s)"

    (cd "$py" && python3 -m unittest -q)
    start=$(date +%s)
    "$bin" build "$py"
    echo "== the Python $kind build took $(($(date +%s) - start)) s"
    (cd "$rust" && CARGO_NET_OFFLINE=true CARGO_TARGET_DIR=$root/target/author-crate "$bin" build)

    for dir in "$py" "$rust"; do
        echo "== $dir"
        start=$(date +%s)
        "$bin" test "$dir/tests/suite.yaml"
        echo "   (test took $(($(date +%s) - start)) s, loading and compiling the component included)"
    done

    for dir in "$py" "$rust"; do
        echo "== $dir: the settings path (an operator's override, a misspelt key, a wrong type)"
        mkdir "$dir/operator"
        cp "$dir/module/$name.wasm" "$dir/operator/"
        { cat "$dir/module/$name.toml"; printf '\n[settings]\nsuspend = true\n'; } > "$dir/operator/$name.toml"
        settings_suite "$name" "$kind" > "$dir/tests/settings.yaml"
        "$bin" test "$dir/tests/settings.yaml"
    done

    if [ "$kind" = backup ]; then
        # An exception the action does not catch: `run` prints the traceback at the default log level.
        echo "== $py: an uncaught exception's traceback is in run's error"
        python3 -c 'import json, sys; item = json.load(open(sys.argv[1])); item["metadata"] = []; print(json.dumps(item))' \
            "$py/tests/fixtures/item.json" > "$work/metadata-a-list.json"
        if (cd "$py" && "$bin" run --modules module --stock none --action "example.io/$name" \
            --item "$work/metadata-a-list.json" --backup tests/fixtures/backup.json \
            --cluster tests/fixtures/cluster) 2> "$work/raised.err"; then
            echo "run of an action that raises exited 0" >&2
            exit 1
        fi
        holds_traceback "run's error" "$work/raised.err"

        # The same through `test`: the failed case's reason holds the traceback.
        echo "== $py: an uncaught exception's traceback is in test's report"
        cp "$work/metadata-a-list.json" "$py/tests/fixtures/"
        printf '%s\n' 'modules: ../module' 'stock: none' 'cases:' \
            '  - name: metadata given as a list' "    action: example.io/$name" \
            '    item: fixtures/metadata-a-list.json' '    backup: fixtures/backup.json' \
            '    cluster: [fixtures/cluster]' '    expect: {additionalItems: []}' > "$py/tests/raises.yaml"
        # The report alone (stdout), as wide as the longest line so that none is wrapped.
        if COLUMNS=400 "$bin" test "$py/tests/raises.yaml" > "$work/raised.out" 2> "$work/raised.log"; then
            echo "test of an action that raises exited 0" >&2
            exit 1
        fi
        holds_traceback "test's report" "$work/raised.out"
    fi

    for dir in "$py" "$rust"; do
        wasm=$dir/module/$name.wasm
        echo "== $(basename "$(dirname "$dir")") $kind: component $(wc -c < "$wasm") bytes, gzipped $(gzip -9 -c "$wasm" | wc -c)"
        (cd "$dir" && "$bin" bench --modules module --stock none --action "example.io/$name" \
            --item tests/fixtures/item.json --$subject tests/fixtures/$subject.json --cluster tests/fixtures/cluster -n 50)
    done
done
