//! The reader against serde_norway (the full YAML library the component used before, kept as a
//! dev-dependency to judge it): every supported document reads to the same tree, every unsupported one
//! is an error with its line.

use super::*;
use serde_json::json;

/// serde_norway's reading of `text`, with every scalar as the string this reader makes of it.
fn norway(text: &str) -> Value {
    fn convert(v: serde_norway::Value) -> Value {
        match v {
            serde_norway::Value::Null => Value::Null,
            serde_norway::Value::Bool(b) => Value::String(b.to_string()),
            serde_norway::Value::Number(n) => Value::String(n.to_string()),
            serde_norway::Value::String(s) => Value::String(s),
            serde_norway::Value::Sequence(items) => {
                Value::Array(items.into_iter().map(convert).collect())
            }
            serde_norway::Value::Mapping(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| match convert(k) {
                        Value::String(k) => (k, convert(v)),
                        other => panic!("key {other}"),
                    })
                    .collect(),
            ),
            serde_norway::Value::Tagged(t) => panic!("tag {t:?}"),
        }
    }
    convert(serde_norway::from_str(text).unwrap())
}

/// Policies as Velero's documentation and users write them, and the YAML forms they use.
const SAME_AS_NORWAY: &[&str] = &[
    "version: v1\nvolumePolicies:\n  - conditions:\n      storageClass: [scratch]\n    action:\n      type: skip\nincludeExcludePolicy:\n  excludedNamespaceScopedResources:\n    - pods\n  excludedClusterScopedResources:\n    - storageclasses.storage.k8s.io\n",
    "# Velero's example\n---\nversion: v1\nvolumePolicies:\n- conditions:\n    capacity: \"10,100Gi\"\n    storageClass:\n    - gp2\n    - ebs-sc\n    csi:\n      driver: aws.efs.csi.driver\n      volumeAttributes: {fsType: ext4, \"a b\": 'it''s'}\n  action:\n    type: skip\n- conditions:\n    nfs: {}\n  action: {type: fs-backup}\n",
    "version: \"v1\"   # quoted\nincludeExcludePolicy:\n  includedNamespaceScopedResources: [pods,\n     persistentvolumeclaims ,\n     datavolumes.cdi.kubevirt.io]\n  excludedNamespaceScopedResources: []\n",
    "version: v1\nincludeExcludePolicy:\n\n  # comment between\n  includedNamespaceScopedResources:\n  - \"pods\"   \n  - 'virtualmachines#1'\n  - a#b\n",
    "version: v1\nnote: |\n  line one\n    indented: not a key\n  # not a comment\n\nother: >-\n  folded\n  text\n\n  para\nkept: |+\n  x\n\nlast: ~\nempty:\n",
    "version: v1\nx:\n  - a\n   - b\n  - c\n    d\n",
    "version: v1\nlist:\n- - a\n  - b\n- k: v\n  k2: [x, {y: z}]\n-\n- 10\n- true\n",
    "version: v1\nescapes: \"tab\\tquote\\\" unicode\\u00e9 slash\\/\"\nplain multi: one\n  two\n  three\nurl: http://example.com:8080/x\n",
    "version: v1\nlabels: {app: web, tier: \"front end\", empty: }\n...\n",
    "",
    "# only a comment\n",
];

#[test]
fn reads_what_velero_policies_use_as_serde_norway_does() {
    for text in SAME_AS_NORWAY {
        assert_eq!(parse(text).unwrap(), norway(text), "{text}");
    }
}

#[test]
fn reads_the_nested_forms_to_the_expected_tree() {
    let text = "a:\n- x: 1\n  y: [p, q]\n- - n\nb: {c: d}\n";
    assert_eq!(
        parse(text).unwrap(),
        json!({"a": [{"x": "1", "y": ["p", "q"]}, ["n"]], "b": {"c": "d"}})
    );
}

/// What this reader does not support, and YAML errors, are errors that say where and what.
#[test]
fn refuses_what_it_does_not_read_with_its_line() {
    // (document, line, what the error says, whether full YAML refuses it too)
    let cases: &[(&str, usize, &str, bool)] = &[
        ("version: v1\nbase: &b {a: 1}\n", 2, "anchors", false),
        ("version: v1\nx: *b\n", 2, "aliases", true),
        ("version: !!str v1\n", 1, "tags", false),
        ("%YAML 1.2\n---\nversion: v1\n", 1, "directives", false),
        (
            "version: v1\n---\nversion: v1\n",
            2,
            "second YAML document",
            true,
        ),
        ("version: v1\nversion: v2\n", 2, "given twice", true),
        ("version: v1\nx: {a: 1, a: 2}\n", 2, "given twice", true),
        (
            "version: v1\nincludeExcludePolicy: [\n",
            2,
            "not closed",
            true,
        ),
        ("version: v1\nx: [a b c\n", 2, "not closed", true),
        (
            "version: v1\nx: [a] b\n",
            2,
            "after a flow collection",
            true,
        ),
        (
            "version: v1\nx: \"open\n  more\"\n",
            2,
            "several lines",
            false,
        ),
        ("version: v1\n  x: 1\n", 2, "indentation", true),
        ("version: v1\nx:\n  - a\n  b: c\n", 4, "indentation", true),
        ("version: v1\nx: a: b\n", 2, "key: value", true),
        ("version: v1\n? complex\n", 2, "complex mapping keys", false),
        ("version: v1\nx:\n\t- a\n", 3, "tab", true),
        ("version: v1\nx: |x\n  a\n", 2, "block scalar header", true),
        ("- a\nb: c\n", 2, "more content", true),
        ("version: v1\nx: \"\\q\"\n", 2, "escape", true),
        ("version: v1\nx: [a, {b: c]\n", 2, "not closed", true),
        (
            "version: v1\nx: [a, {b: c} d]\n",
            2,
            "expected `,` or `]`",
            true,
        ),
    ];
    for (text, line, what, yaml_error) in cases {
        let e = parse(text).unwrap_err();
        assert_eq!(e.line, *line, "{text}: {e}");
        assert!(e.to_string().contains(what), "{text}: {e}");
        let full = serde_norway::from_str::<serde_norway::Value>(text);
        assert_eq!(full.is_err(), *yaml_error, "{text}: {full:?}");
    }
}

/// Nesting past 64 collections, in block or flow form, is refused (not a stack overflow).
#[test]
fn refuses_documents_nested_too_deep() {
    let flow = format!("x: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let e = parse(&flow).unwrap_err();
    assert!(e.to_string().contains("nested deeper than 64"), "{e}");
    let block: String = (0..100)
        .map(|n| format!("{}k{n}:\n", " ".repeat(n)))
        .collect();
    let e = parse(&block).unwrap_err();
    assert_eq!(
        (e.line, e.what.as_str()),
        (65, "collections nested deeper than 64 levels")
    );
    // 64 levels are read.
    let ok = format!("x: {}a{}\n", "[".repeat(63), "]".repeat(63));
    assert!(parse(&ok).is_ok());
}

#[test]
fn block_scalars_chomp_and_fold_as_yaml_says() {
    let v =
        parse("a: |\n  x\n  y\n\nb: |-\n  x\nc: >\n  p\n  q\n\n\n  r\nd: |2\n    deep\n").unwrap();
    assert_eq!(
        v,
        json!({"a": "x\ny\n", "b": "x", "c": "p q\n\nr\n", "d": "  deep\n"})
    );
    assert_eq!(
        v,
        norway("a: |\n  x\n  y\n\nb: |-\n  x\nc: >\n  p\n  q\n\n\n  r\nd: |2\n    deep\n")
    );
}
