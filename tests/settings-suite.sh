# Sourced by tests/python/run.sh and tests/javascript/run.sh (POSIX sh): the suite of a scaffold's
# settings path, the same for every language, and the check of what a guest's error shows.

# Fails unless the file $2 (what $1 printed) holds each of the lines that follow, printing the file.
holds_lines() {
    what=$1 file=$2
    shift 2
    for line in "$@"; do
        grep -qF "$line" "$file" || {
            echo "$what lacks the line: $line" >&2
            cat "$file" >&2
            exit 1
        }
    done
}

# The settings path of module NAME of KIND, as a suite against the module directory ../operator (its
# manifest sets `suspend = true`, as an operator's override would): the override reaches the action, a
# misspelt key and a value of the wrong type are refused naming the key. tests/scaffolds.rs runs the
# same on every Rust kind in `make test`.
settings_suite() {
    name=$1 kind=$2
    subject=$([ "$kind" = restore ] && echo restore || echo backup)
    case $kind in
        delete) suspended='clusterWrites: []' ;;
        *) suspended='additionalItems: []
      item: fixtures/item.json' ;;
    esac
    echo "modules: ../operator"
    echo "stock: none"
    echo "cases:"
    for probe in "as the module directory's manifest sets it||$suspended" \
        "a misspelt setting|{suspnd: true}|error: 'did you mean \"suspend\"'" \
        "a value of the wrong type|{suspend: sometimes}|error: 'settings.suspend'"; do
        title=${probe%%|*} rest=${probe#*|}
        settings=${rest%%|*} expect=${rest#*|}
        echo "  - name: $title"
        echo "    action: example.io/$name"
        echo "    item: fixtures/item.json"
        echo "    $subject: fixtures/$subject.json"
        echo "    cluster: [fixtures/cluster]"
        [ -z "$settings" ] || echo "    settings: $settings"
        echo "    expect:"
        echo "      $expect"
    done
}
