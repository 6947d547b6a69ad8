//! `--update`: the expectation observed for a failing case, written back into its suite file in
//! place of the case's `expect:`, the rest of the file as written.

use std::path::Path;

use anyhow::{anyhow, Context};
use serde_json::Value;

use super::check::{ids, scalar, Outcome};
use super::suite::{parse, Case, Expect, Id, Suite};
use crate::cli::failure::{Failure, EXIT_BAD_INPUT};
use crate::cli::suite_layout;

// Here rather than beside `Id` (in `suite`): only `--update` writes YAML.
impl Id {
    /// The YAML flow mapping `--update` writes.
    fn to_yaml(&self) -> String {
        let mut fields = vec![
            format!("group: {}", yaml_string(&self.group)),
            format!("resource: {}", yaml_string(&self.resource)),
        ];
        if !self.namespace.is_empty() {
            fields.push(format!("namespace: {}", yaml_string(&self.namespace)));
        }
        fields.push(format!("name: {}", yaml_string(&self.name)));
        format!("{{{}}}", fields.join(", "))
    }
}

/// The `expect:` block `--update` writes for a failing case: the keys the case had, with the values
/// observed. None when the failure is not one an expectation can record (bad input).
///
/// `pub(super)`: the runner records it in a failing case's outcome.
pub(super) fn observed_expectation(
    expect: &Expect,
    result: &Result<Value, Failure>,
) -> Option<String> {
    let output = match result {
        Err(failure) if failure.code == EXIT_BAD_INPUT && expect.error.is_none() => return None,
        Err(failure) => return Some(format!("error: {}\n", yaml_string(&failure.message))),
        Ok(output) => output,
    };
    let mut keys: Vec<&str> = expect
        .keys()
        .into_iter()
        .filter(|k| *k != "error")
        .collect();
    if keys.is_empty() {
        keys = ["additionalItems", "relatedItems", "skipRestore"]
            .into_iter()
            .filter(|k| output.get(*k).is_some())
            .collect();
    }
    Some(
        keys.into_iter()
            .map(|key| observed_key(key, expect, output))
            .collect(),
    )
}

/// The lines of `--update`'s expectation for one key, from the run's `output`.
fn observed_key(key: &str, expect: &Expect, output: &Value) -> String {
    match key {
        "additionalItems" | "relatedItems" | "additionalItemsInclude" | "postOperationItems" => {
            observed_items(key, output)
        }
        "skipRestore" | "operationId" | "waitForAdditionalItems" | "additionalItemsTimeout" => {
            // Absent (no longer this kind of action): YAML's null, which the suite reads as no
            // expectation rather than one that can never hold.
            let value = scalar(output, key).unwrap_or(Value::Null);
            format!("{key}: {}\n", yaml_value(&value))
        }
        "pointers" => observed_pointers(expect, output),
        "item" => {
            let file = expect.item.as_deref().unwrap_or(Path::new(""));
            format!("item: {}\n", yaml_string(&file.display().to_string()))
        }
        "clusterWrites" => observed_writes(output),
        _ => String::new(),
    }
}

/// An item list (`additionalItemsInclude` records every additional item, in order).
fn observed_items(key: &str, output: &Value) -> String {
    let source = match key {
        "relatedItems" | "postOperationItems" => key,
        _ => "additionalItems",
    };
    let ids = ids(output, source);
    if ids.is_empty() {
        return format!("{key}: []\n");
    }
    let mut text = format!("{key}:\n");
    for id in ids {
        text.push_str(&format!("  - {}\n", id.to_yaml()));
    }
    text
}

/// The values now at the pointers the case names (a pointer that leads nowhere is left out).
fn observed_pointers(expect: &Expect, output: &Value) -> String {
    let item = output.get("item").unwrap_or(&Value::Null);
    let mut text = "pointers:\n".to_string();
    for pointer in expect.pointers.iter().flat_map(|p| p.keys()) {
        if let Some(value) = item.pointer(pointer) {
            text.push_str(&format!(
                "  {}: {}\n",
                yaml_string(pointer),
                yaml_value(value)
            ));
        }
    }
    text
}

/// The cluster writes made, each by the fields that name it.
fn observed_writes(output: &Value) -> String {
    let writes = output
        .get("clusterWrites")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if writes.is_empty() {
        return "clusterWrites: []\n".to_string();
    }
    let mut text = "clusterWrites:\n".to_string();
    for write in writes {
        let fields: Vec<String> = ["verb", "apiVersion", "kind", "namespace", "name"]
            .iter()
            .filter_map(|k| write.get(*k).map(|v| (k, v)))
            .filter(|(_, v)| v.as_str() != Some(""))
            .map(|(k, v)| format!("{k}: {}", yaml_value(v)))
            .collect();
        text.push_str(&format!("  - {{{}}}\n", fields.join(", ")));
    }
    text
}

/// A string as a YAML scalar: plain when YAML reads it back as that same string, else quoted.
fn yaml_string(text: &str) -> String {
    let plain = !text.is_empty()
        && !text.contains(['\n', '{', '}', '[', ']', ',', '#', '"', '\''])
        && text.trim() == text
        && matches!(serde_norway::from_str::<Value>(text), Ok(Value::String(s)) if s == text);
    if plain {
        text.to_string()
    } else {
        Value::String(text.to_string()).to_string()
    }
}

/// A JSON value as YAML on one line (flow style; JSON's quoted strings are YAML's too).
fn yaml_value(value: &Value) -> String {
    match value {
        Value::String(s) => yaml_string(s),
        other => other.to_string(),
    }
}

/// Rewrites the expectations of the failing cases of one suite file (`--update`); returns how many.
/// Only the bytes of those cases' `expect:` change (found by parsing, see [`suite_layout`]); the new
/// text must read back as the same suite but for those expectations before anything is written.
///
/// `pub(super)`: the runner calls it after a suite's cases ran.
pub(super) fn update(
    file: &Path,
    text: &str,
    suite: &Suite,
    outcomes: &mut [Outcome],
) -> anyhow::Result<usize> {
    let observed: Vec<(usize, String)> = outcomes
        .iter()
        .enumerate()
        .filter_map(|(n, o)| o.observed.clone().map(|block| (n, block)))
        .collect();
    let blocks: Vec<(usize, &str)> = observed.iter().map(|(n, b)| (*n, b.as_str())).collect();
    let (new_text, unwritable) =
        rewrite(text, &blocks).with_context(|| file.display().to_string())?;
    let mut count = 0;
    let mut items = Vec::new();
    for &(n, _) in &blocks {
        let outcome = &mut outcomes[n];
        if unwritable.contains(&n) {
            outcome.reasons.push(
                "--update: this case is not written as `key: value` lines (it is a flow mapping or \
                 an alias); update its expect: by hand"
                    .to_string(),
            );
            continue;
        }
        outcome.updated = true;
        count += 1;
        items.extend(outcome.item_file.clone());
    }
    if count == 0 {
        return Ok(0);
    }
    let dir = file.parent().unwrap_or(Path::new(""));
    for (path, _) in &items {
        expectation_file_in(dir, path)?;
    }
    let not_written = |why: String| {
        format!(
            "{}: the rewritten suite would not read back {why}; nothing written",
            file.display()
        )
    };
    let reread = parse(&new_text).map_err(|e| anyhow!(not_written(format!("({e:#})"))))?;
    if let Some(n) = changed_beyond_expectations(suite, &reread, &blocks, &unwritable) {
        return Err(anyhow!(not_written(format!(
            "as the same suite (case {} would change beyond its expect:)",
            n + 1
        ))));
    }
    crate::cli::output_file::replace(file, new_text.as_bytes())?;
    for (path, item) in items {
        let json = serde_json::to_string_pretty(&item).unwrap_or_default() + "\n";
        write_no_follow(&path, json.as_bytes())
            .map_err(|e| anyhow!("{}: cannot be written: {e}", path.display()))?;
    }
    Ok(count)
}

/// `text` with the `expect:` of the cases given (by their index) replaced by their new blocks, and
/// the indexes of the cases it cannot rewrite (not written as block mappings).
fn rewrite(text: &str, blocks: &[(usize, &str)]) -> anyhow::Result<(String, Vec<usize>)> {
    let layout = suite_layout::cases(text).map_err(|e| anyhow!("invalid YAML {e}"))?;
    let mut edits = Vec::new();
    let mut unwritable = Vec::new();
    for &(n, block) in blocks {
        match layout.get(n).and_then(|case| case.block.as_ref()) {
            Some(case) => edits.push(case.edit(text, block)),
            None => unwritable.push(n),
        }
    }
    // From the last to the first, so the places of those before stay as they were found.
    edits.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
    let mut new_text = text.to_string();
    for (range, replacement) in edits {
        new_text.replace_range(range, &replacement);
    }
    Ok((new_text, unwritable))
}

/// The first case of `before` that `after` (the rewritten suite) changes in more than the expectation
/// `--update` wrote for it, if any; the suite's other keys count as case 0.
fn changed_beyond_expectations(
    before: &Suite,
    after: &Suite,
    blocks: &[(usize, &str)],
    unwritable: &[usize],
) -> Option<usize> {
    if (&before.modules, &before.stock) != (&after.modules, &after.stock)
        || before.cases.len() != after.cases.len()
    {
        return Some(0);
    }
    let written = |n: usize| {
        blocks
            .iter()
            .find(|(m, _)| *m == n && !unwritable.contains(&n))
            .map(|(_, block)| serde_norway::from_str::<Option<Expect>>(block))
    };
    before
        .cases
        .iter()
        .zip(&after.cases)
        .enumerate()
        .find_map(|(n, (was, is))| {
            let expect = match written(n) {
                None => was.expect.clone(),
                Some(Ok(expect)) => expect.unwrap_or_default(),
                Some(Err(_)) => return Some(n),
            };
            let same = Case {
                expect,
                ..was.clone()
            };
            (&same != is).then_some(n)
        })
}

/// Checks that `--update` may rewrite `path`, an `expect.item` file of a suite in `dir`: it must lie
/// in the suite's directory or below it (no absolute path, no `..`), and neither it nor a directory
/// on the way may be a symbolic link. Otherwise nothing of the suite is written.
fn expectation_file_in(dir: &Path, path: &Path) -> anyhow::Result<()> {
    let refuse = |why: &str| {
        Err(anyhow!(
            "expect.item {}: {why}; --update writes only files in the suite's directory; nothing written",
            path.display()
        ))
    };
    let Ok(inside) = path.strip_prefix(dir) else {
        return refuse("outside the suite's directory");
    };
    let mut at = dir.to_path_buf();
    for component in inside.components() {
        let std::path::Component::Normal(name) = component else {
            return refuse("outside the suite's directory");
        };
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return refuse(&format!("{} is a symbolic link", at.display()))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Writes `bytes` to `path`, creating or truncating it, but never through a symbolic link (checked
/// before by [`expectation_file_in`]; `O_NOFOLLOW` closes the gap between the check and the write).
fn write_no_follow(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?
        .write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::test::suite::tests::SUITE;

    #[test]
    fn update_replaces_only_the_expect_block_of_the_case() {
        let block =
            "additionalItems:\n  - {group: \"\", resource: pods, namespace: ns, name: new}\n";
        let (out, unwritable) = rewrite(SUITE, &[(0, block)]).unwrap();
        assert!(unwritable.is_empty());
        assert!(
            out.contains("name: new}") && !out.contains("name: old}"),
            "{out}"
        );
        assert!(
            out.contains("# a comment that stays") && out.contains("# a comment after the case")
        );
        let (added, _) = rewrite(SUITE, &[(1, "skipRestore: true\n")]).unwrap();
        assert!(
            added.ends_with("    expect:\n      skipRestore: true\n"),
            "{added}"
        );
        let suite = parse(&added).unwrap();
        assert_eq!(suite.cases[1].expect.skip_restore, Some(true));
        let (both, _) = rewrite(SUITE, &[(0, block), (1, "skipRestore: true\n")]).unwrap();
        assert_eq!(
            parse(&both).unwrap(),
            parse(&added.replace("name: old}", "name: new}")).unwrap()
        );
    }

    /// The attack of issue 26: a block scalar of the first case holds the text of a `- name:` and an
    /// `expect:` of the second. `--update` of the second must change the second, and leave the
    /// first case's text byte for byte.
    #[test]
    fn update_finds_the_case_by_parsing_not_by_text_inside_a_block_scalar() {
        let decoy = concat!(
            "  - name: first\n",
            "    action: a\n",
            "    item: i.json\n",
            "    backup: b.json\n",
            "    settings:\n",
            "      note: |\n",
            "        - name: second\n",
            "          action: a\n",
            "          expect:\n",
            "            skipRestore: false\n",
        );
        let text = format!(
            "cases:\n{decoy}  - name: second\n    action: a\n    item: i.json\n    backup: b.json\n    expect:\n      skipRestore: false\n"
        );
        let suite = parse(&text).unwrap();
        let (out, unwritable) = rewrite(&text, &[(1, "skipRestore: true\n")]).unwrap();
        assert!(unwritable.is_empty());
        assert!(
            out.starts_with(&format!("cases:\n{decoy}")),
            "the first case is as written: {out}"
        );
        let after = parse(&out).unwrap();
        assert_eq!(after.cases[1].expect.skip_restore, Some(true), "{out}");
        assert_eq!(
            changed_beyond_expectations(&suite, &after, &[(1, "skipRestore: true\n")], &[]),
            None
        );
        // What a search of the text would have written is refused before it is written.
        let wrong = text.replacen("skipRestore: false", "skipRestore: true", 1);
        assert_eq!(
            changed_beyond_expectations(
                &suite,
                &parse(&wrong).unwrap(),
                &[(1, "skipRestore: true\n")],
                &[]
            ),
            Some(0)
        );
    }

    #[test]
    fn a_flow_style_case_is_left_to_be_updated_by_hand() {
        let text = "cases:\n  - {name: a, action: a, item: i.json, backup: b.json}\n";
        let (out, unwritable) = rewrite(text, &[(0, "skipRestore: true\n")]).unwrap();
        assert_eq!((out.as_str(), unwritable), (text, vec![0]));
    }

    #[test]
    fn strings_are_plain_only_when_yaml_reads_them_back() {
        assert_eq!(yaml_string("pods"), "pods");
        assert_eq!(yaml_string(""), "\"\"");
        assert_eq!(yaml_string("true"), "\"true\"");
        assert_eq!(yaml_string("a: b"), "\"a: b\"");
        assert_eq!(
            yaml_string("/metadata/labels/a~1b"),
            "/metadata/labels/a~1b"
        );
    }
}
