#!/bin/sh
# `make javascript`: the third language. For the backup, restore and delete kinds, `velero-wasm new
# --lang javascript --kind KIND` and `velero-wasm new --kind KIND` (Rust) in a scratch directory; the
# JavaScript module's unit tests (`node --test`, on fakes of the WIT's imports); both built with
# `velero-wasm build`; the one suite both generate (the same file, its second case overriding the
# setting `suspend`, which the action reads typed) passes on each, and so does a suite of the settings
# path (an operator's override, a misspelt key, a wrong type); then `velero-wasm bench` of each and
# their sizes; last, a bug planted in the backup action's app.js shows its TypeError and stack in `run`'s
# error. Not part of `make test`: componentize-js snapshots a JavaScript engine (about 40 s a
# module) and a debug host compiles the 12 MB component for a minute or so.
#
# componentize-js comes from npm into target/javascript-npm, at the version the scaffold's package.json
# pins (COMPONENTIZE_JS names another executable); the Rust twin builds offline from Cargo's cache,
# with the workspace's Cargo.lock.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_BUILD_TARGET:-$(uname -m)-unknown-linux-musl}
cargo build -q -p velero-wasm --target "$target"
bin=$root/target/$target/debug/velero-wasm
version=0.23.0  # host/src/cli/new.rs, COMPONENTIZE_JS_VERSION

if [ -z "${COMPONENTIZE_JS:-}" ]; then
    npm_dir=$root/target/javascript-npm
    package=$npm_dir/node_modules/@bytecodealliance/componentize-js/package.json
    if ! grep -q "\"version\": \"$version\"" "$package" 2>/dev/null; then
        mkdir -p "$npm_dir"
        [ -f "$npm_dir/package.json" ] || echo '{"private": true}' > "$npm_dir/package.json"
        (cd "$npm_dir" && npm install --no-audit --no-fund --save-exact "@bytecodealliance/componentize-js@$version")
    fi
    COMPONENTIZE_JS=$npm_dir/node_modules/.bin/componentize-js
fi
export COMPONENTIZE_JS

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$root/tests/settings-suite.sh"

# One module of each kind in each language: the same name, hence the same action and the same suite.
for kind in backup restore delete; do
    name=$kind-pvcs
    js=$work/javascript/$name
    rust=$work/rust/$name
    subject=$([ "$kind" = restore ] && echo restore || echo backup)

    "$bin" new --lang javascript --kind "$kind" "$js"
    "$bin" new --kind "$kind" "$rust"
    cp "$root/Cargo.lock" "$rust/"
    cmp "$js/tests/suite.yaml" "$rust/tests/suite.yaml"
    echo "== $kind: one suite for both: $(grep -c '^  - name:' "$js/tests/suite.yaml") case(s)"
    grep -q "\"@bytecodealliance/componentize-js\": \"$version\"" "$js/package.json" || {
        echo "the scaffold's package.json does not pin componentize-js $version (tests/javascript/run.sh)" >&2
        exit 1
    }

    (cd "$js" && node --test)
    start=$(date +%s)
    "$bin" build "$js"
    echo "== the JavaScript $kind build took $(($(date +%s) - start)) s"
    (cd "$rust" && CARGO_NET_OFFLINE=true CARGO_TARGET_DIR=$root/target/author-crate "$bin" build)

    for dir in "$js" "$rust"; do
        echo "== $dir"
        start=$(date +%s)
        "$bin" test "$dir/tests/suite.yaml"
        echo "   (test took $(($(date +%s) - start)) s, loading and compiling the component included)"
    done

    for dir in "$js" "$rust"; do
        echo "== $dir: the settings path (an operator's override, a misspelt key, a wrong type)"
        mkdir "$dir/operator"
        cp "$dir/module/$name.wasm" "$dir/operator/"
        { cat "$dir/module/$name.toml"; printf '\n[settings]\nsuspend = true\n'; } > "$dir/operator/$name.toml"
        settings_suite "$name" "$kind" > "$dir/tests/settings.yaml"
        "$bin" test "$dir/tests/settings.yaml"
    done

    for dir in "$js" "$rust"; do
        wasm=$dir/module/$name.wasm
        echo "== $(basename "$(dirname "$dir")") $kind: component $(wc -c < "$wasm") bytes, gzipped $(gzip -9 -c "$wasm" | wc -c)"
        (cd "$dir" && "$bin" bench --modules module --stock none --action "example.io/$name" \
            --item tests/fixtures/item.json --$subject tests/fixtures/$subject.json --cluster tests/fixtures/cluster -n 50)
    done

    if [ "$kind" = backup ]; then
        # A bug an author might write (a property of undefined), built and run: `run` prints the
        # TypeError and its stack, down to the line in app.js, at the default log level.
        echo "== $js: a bug's exception, with its stack, is in run's error"
        sed -i 's/item.metadata.labels\[LABEL\] = String(pvcs.length);/item.metadata.labels.counted.pvcs = pvcs.length;/' "$js/app.js"
        grep -q 'labels.counted.pvcs' "$js/app.js" || { echo "the bug was not planted in app.js (tests/javascript/run.sh)" >&2; exit 1; }
        "$bin" build "$js"
        if (cd "$js" && "$bin" run --modules module --stock none --action "example.io/$name" \
            --item tests/fixtures/item.json --backup tests/fixtures/backup.json \
            --cluster tests/fixtures/cluster) 2> "$work/thrown.err"; then
            echo "run of an action that throws exited 0" >&2
            exit 1
        fi
        holds_lines "run's error" "$work/thrown.err" \
            'TypeError: can'"'"'t access property "pvcs", item.metadata.labels.counted is undefined' \
            'label@app.js:' 'backup@app.js:'
    fi
done
