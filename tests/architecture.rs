//! docs/architecture.md is the map a newcomer reads first, so it must name what is there: every file
//! or folder it names exists, and every room of `host/src` (each folder and each file at its root)
//! has a row in its table of rooms. A file renamed, moved or added without the map fails here,
//! naming what differs.

use std::collections::BTreeSet;
use std::path::Path;

/// The repository's root: the package is `host/`.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// Folders that hold no source of ours: build output, dependencies, fuzzing's corpus.
const SKIPPED: &[&str] = &["target", ".git", "node_modules", "corpus", "artifacts"];

fn architecture() -> String {
    std::fs::read_to_string(root().join("docs/architecture.md")).unwrap()
}

/// Every file and folder of the repository, relative to its root, folders ending in `/`.
fn repository_paths() -> Vec<String> {
    fn walk(dir: &Path, root: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if SKIPPED.contains(&name.as_str()) {
                continue;
            }
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .to_string();
            if path.is_dir() {
                found.push(format!("{relative}/"));
                walk(&path, root, found);
            } else {
                found.push(relative);
            }
        }
    }
    let mut found = Vec::new();
    walk(root(), root(), &mut found);
    found
}

/// A word that names a Rust file or a folder: `live.rs`, `plugin/upload.rs`, `cluster/`.
fn names_a_path(word: &str) -> bool {
    let path_like = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-/.".contains(c))
        && !word.starts_with('/')
        && !word.contains("//");
    path_like
        && (word.ends_with(".rs")
            || (word.ends_with('/') && word.len() > 1)
            || (word.contains('/') && !word.contains('.')))
}

/// The paths the page names: in backquotes in its prose and tables, and as words in its diagrams.
fn named_paths(page: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    let mut in_diagram = false;
    for line in page.lines() {
        if line.starts_with("```") {
            in_diagram = !in_diagram;
            continue;
        }
        let words: Vec<&str> = if in_diagram {
            line.split(|c: char| c.is_whitespace() || ",():".contains(c))
                .collect()
        } else {
            line.split('`').skip(1).step_by(2).collect()
        };
        for word in words {
            let word = word.trim_end_matches(|c| ".,;".contains(c) && !word.ends_with(".rs"));
            if names_a_path(word) {
                named.insert(word.to_string());
            }
        }
    }
    named
}

#[test]
fn every_file_and_folder_the_page_names_exists() {
    let paths = repository_paths();
    let missing: Vec<String> = named_paths(&architecture())
        .into_iter()
        .filter(|named| {
            // A diagram may name a folder without its slash, or a module without `.rs`.
            let forms = [named.clone(), format!("{named}/"), format!("{named}.rs")];
            !paths.iter().any(|p| {
                forms
                    .iter()
                    .any(|form| p == form || p.ends_with(&format!("/{form}")))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md names what the repository does not hold: {missing:?}"
    );
}

#[test]
fn every_room_of_the_host_has_a_row_in_the_table_of_rooms() {
    let page = architecture();
    let table: BTreeSet<&str> = page
        .lines()
        .filter(|line| line.starts_with("| `"))
        .flat_map(|line| {
            line.split('|')
                .nth(1)
                .unwrap()
                .split('`')
                .skip(1)
                .step_by(2)
        })
        .collect();
    let missing: Vec<String> = host_rooms()
        .into_iter()
        .filter(|room| !table.contains(room.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "host/src rooms without a row in docs/architecture.md §1: {missing:?}"
    );
}

/// The entries of `host/src`: each folder (with its slash) and each file at its root.
fn host_rooms() -> Vec<String> {
    std::fs::read_dir(root().join("host/src"))
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                format!("{name}/")
            } else {
                name
            }
        })
        // The crate's root only declares the rooms.
        .filter(|room| room != "lib.rs")
        .collect()
}

#[test]
fn every_room_of_the_host_stands_on_a_floor() {
    let page = architecture();
    let floors = page
        .split("## 2.")
        .nth(1)
        .and_then(|section| section.split("```").nth(1))
        .expect("§2 draws the floors in a diagram");
    let words: BTreeSet<&str> = floors
        .split(|c: char| c.is_whitespace() || c == ',')
        .collect();
    let missing: Vec<String> = host_rooms()
        .into_iter()
        .filter(|room| !words.contains(room.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "host/src rooms on no floor of docs/architecture.md §2: {missing:?}"
    );
}

/// Where the page's tables do not render: a row whose cells are not its header's, or a row broken
/// over lines (Markdown ends a table at the first line that does not start with `|`).
fn broken_table_rows(page: &str) -> Vec<String> {
    let mut broken = Vec::new();
    let mut header_cells = None;
    for line in page.lines() {
        match (line.starts_with('|'), header_cells) {
            (true, None) => header_cells = Some(line.matches('|').count()),
            (true, Some(cells)) if line.matches('|').count() != cells => {
                broken.push(line.to_string())
            }
            (true, Some(_)) => {}
            (false, Some(_)) if !line.trim().is_empty() => {
                broken.push(line.to_string());
                header_cells = None;
            }
            (false, _) => header_cells = None,
        }
    }
    broken
}

#[test]
fn every_table_renders() {
    let broken = broken_table_rows(&architecture());
    assert!(
        broken.is_empty(),
        "docs/architecture.md has table rows that do not render: {broken:#?}"
    );
    // The check sees both ways a row breaks.
    let page = "| a | b |\n|---|---|\n| one cell |\n| two | cells,\nbroken |\n\ntext\n";
    assert_eq!(
        broken_table_rows(page),
        ["| one cell |", "| two | cells,", "broken |"]
    );
}

#[test]
fn a_name_that_is_not_there_is_found_missing() {
    // The check itself can fail: a diagram word and a quoted path are both read.
    let page = "`cluster/gone.rs` and\n```text\nplugin/nowhere.rs   a line\n```\n";
    let named = named_paths(page);
    assert_eq!(
        named,
        BTreeSet::from([
            "cluster/gone.rs".to_string(),
            "plugin/nowhere.rs".to_string()
        ])
    );
    let paths = repository_paths();
    assert!(!paths.iter().any(|p| p.ends_with("cluster/gone.rs")));
    assert!(paths
        .iter()
        .any(|p| p.ends_with("host/src/cluster/live/mod.rs")));
}

#[test]
fn no_two_files_of_the_host_share_a_name() {
    // A name says what a file does; `mod.rs` and `error.rs` say it by their folder, and the
    // scaffold templates of `velero-wasm new` are the files of other projects.
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for path in repository_paths() {
        let Some(file) = path.strip_prefix("host/src/") else {
            continue;
        };
        let name = file.rsplit('/').next().unwrap_or(file);
        if file.ends_with(".rs")
            && !file.starts_with("cli/new/")
            && !["mod.rs", "error.rs"].contains(&name)
        {
            seen.entry(name.to_string()).or_default().push(path.clone());
        }
    }
    let shared: Vec<&Vec<String>> = seen.values().filter(|paths| paths.len() > 1).collect();
    assert!(
        shared.is_empty(),
        "files of host/src that share a name: {shared:?}"
    );
}
