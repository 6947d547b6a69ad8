//! `velero-wasm diff`: two module sets compared on a backup before the new one serves.
//!
//! - The kubevirt fixture cluster, packed as Velero packs a backup (items under their resource and
//!   namespace, again under `<version>-preferredversion/`, and `metadata/version`), is the backup.
//! - The stock set against itself: every result is the same, exit 0.
//! - The stock set against a kubevirt override with `mode = "upstream"` (a manifest alone): exit 1,
//!   naming exactly the items whose results differ, per action (backup, item-block and restore
//!   actions); `--json` says the same for machines.
//! - Actions only one set has (upstream mode has no `block-launcher-pod-action`, `block-vmi-action` nor
//!   `restore-operation-action`) are named, each difference they make says why, and the summary
//!   says so.
//! - A module ConfigMap file from `module pack` is a set as a directory is.
//! - Bad input (no such backup, a file that is not an archive, a set that does not load, an archive
//!   that is not Velero's): exit 2 with a message saying what is wrong.
//! - Items within the size cap whose parse would take diff past its memory bound (8 MiB of `[0,…]`,
//!   `["",…]`, `[{},…]`, `[[],…]`) are refused at their entry, naming the bound, leaving nothing.
//! - A diff killed with SIGKILL while it compares leaves nothing in the temporary directory.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::json;
use serde_json::Value;
use support::{root, stderr, stdout_json, velero_wasm};
use velero_wasm::action::ItemRef;
use velero_wasm::plugin::proto::generated::backup_item_action_client::BackupItemActionClient;
use velero_wasm::plugin::proto::generated::ExecuteRequest;

/// The fixture cluster's objects.
fn fixture_objects() -> Vec<Value> {
    let dir = root().join("tests/fixtures/kubevirt/cluster");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect()
}

/// Writes `objects` as a Velero backup archive: each item at
/// `resources/<resource.group>/(namespaces/<ns>|cluster)/<name>.json` and again under
/// `<version>-preferredversion/`, with `metadata/version`.
fn velero_archive(objects: &[Value], path: &Path) {
    let file = std::fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let mut add = |name: &str, bytes: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o755);
        header.set_cksum();
        tar.append_data(&mut header, name, bytes).unwrap();
    };
    add("metadata/version", b"1.1.0\n");
    for object in objects {
        let id = ItemRef::parse(&object.to_string()).unwrap();
        let version = id.api_version.rsplit('/').next().unwrap().to_string();
        let place = if id.namespace.is_empty() {
            format!("cluster/{}.json", id.name)
        } else {
            format!("namespaces/{}/{}.json", id.namespace, id.name)
        };
        let bytes = serde_json::to_vec(object).unwrap();
        let gr = id.group_resource();
        add(&format!("resources/{gr}/{place}"), &bytes);
        add(
            &format!("resources/{gr}/{version}-preferredversion/{place}"),
            &bytes,
        );
    }
    tar.into_inner().unwrap().finish().unwrap();
}

/// A temporary directory with the fixture archive in it.
fn fixture_archive() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nightly.tar.gz");
    velero_archive(&fixture_objects(), &path);
    (dir, path.display().to_string())
}

/// A directory with kubevirt's stock override: `mode = "upstream"`, no component.
fn upstream_override(dir: &Path) -> String {
    let modules = dir.join("upstream");
    std::fs::create_dir(&modules).unwrap();
    std::fs::write(
        modules.join("kubevirt.toml"),
        "[settings]\nmode = \"upstream\"\n",
    )
    .unwrap();
    modules.display().to_string()
}

/// (action, item) of every differing result of a `--json` report.
fn differing(report: &Value) -> BTreeSet<(String, String)> {
    report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|a| {
            a["differing"].as_array().unwrap().iter().map(|d| {
                (
                    a["action"].as_str().unwrap().to_string(),
                    format!(
                        "{} {}/{}",
                        d["groupResource"].as_str().unwrap(),
                        d["namespace"].as_str().unwrap(),
                        d["name"].as_str().unwrap()
                    ),
                )
            })
        })
        .collect()
}

const VM: &str = "kubevirt-velero-plugin/backup-virtualmachine-action";
const VMI: &str = "kubevirt-velero-plugin/backup-virtualmachineinstance-action";
const DV: &str = "kubevirt-velero-plugin/backup-datavolume-action";
const BLOCK_VM: &str = "kubevirt-velero-plugin/block-vm-action";
const BLOCK_VMI: &str = "kubevirt-velero-plugin/block-vmi-action";
const BLOCK_POD: &str = "kubevirt-velero-plugin/block-launcher-pod-action";
const RESTORE_VM: &str = "kubevirt-velero-plugin/restore-vm-action";
const RESTORE_OPERATION: &str = "kubevirt-velero-plugin/restore-operation-action";
const RESTORE_PVC: &str = "kubevirt-velero-plugin/restore-pvc-action";
const RESTORE_VS: &str = "kubevirt-velero-plugin/restore-volumesnapshot-action";

#[test]
fn the_stock_set_against_itself_is_identical_and_exits_0() {
    let (_dir, archive) = fixture_archive();
    let out = velero_wasm(&["diff", &archive, "--new", "stock"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!("29 items of {archive}")),
        "{text}"
    );
    assert!(text.contains("identical: 0 differing results"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
}

#[test]
fn an_upstream_mode_override_differs_in_exactly_the_items_whose_results_change() {
    let (dir, archive) = fixture_archive();
    let modules = upstream_override(dir.path());
    let out = velero_wasm(&["diff", &archive, "--new", &modules, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = stdout_json(&out);
    assert_eq!(report["items"], 29);
    assert_eq!(report["formatVersion"], "1.1.0");
    let expected: BTreeSet<(String, String)> = [
        (
            DV,
            "datavolumes.cdi.kubevirt.io vm-workloads/fedora-web-01-rootdisk",
        ),
        (
            DV,
            "datavolumes.cdi.kubevirt.io vm-workloads/scratch-import",
        ),
        (VM, "virtualmachines.kubevirt.io vm-workloads/fedora-web-01"),
        (
            VM,
            "virtualmachines.kubevirt.io vm-workloads/rhel9-cache-02",
        ),
        (VM, "virtualmachines.kubevirt.io vm-workloads/win2k22-sql"),
        (
            VMI,
            "virtualmachineinstances.kubevirt.io vm-workloads/web-replica-8kq2f",
        ),
        // The item-block action groups the same extra items.
        (
            BLOCK_VM,
            "virtualmachines.kubevirt.io vm-workloads/fedora-web-01",
        ),
        (
            BLOCK_VM,
            "virtualmachines.kubevirt.io vm-workloads/win2k22-sql",
        ),
        // Upstream has no item-block action for pods nor VMIs: each result is compared with nothing.
        (BLOCK_POD, "pods vm-workloads/hp-volume-m4tq9"),
        (
            BLOCK_POD,
            "pods vm-workloads/virt-launcher-batch-worker-7-p2w8k",
        ),
        (
            BLOCK_POD,
            "pods vm-workloads/virt-launcher-fedora-web-01-q7m2x",
        ),
        (
            BLOCK_VMI,
            "virtualmachineinstances.kubevirt.io vm-workloads/fedora-web-01",
        ),
        (
            BLOCK_VMI,
            "virtualmachineinstances.kubevirt.io vm-workloads/batch-worker-7",
        ),
        (
            BLOCK_VMI,
            "virtualmachineinstances.kubevirt.io vm-workloads/web-replica-8kq2f",
        ),
        // Restore actions are compared too: upstream restores fewer of a VM's referenced objects.
        (
            RESTORE_VM,
            "virtualmachines.kubevirt.io vm-workloads/fedora-web-01",
        ),
        (
            RESTORE_VM,
            "virtualmachines.kubevirt.io vm-workloads/win2k22-sql",
        ),
        // Upstream re-encodes what it restores from its Go types: Velero removed creationTimestamp
        // and status, which come back as null and {} (docs/kubevirt.md#s8-3).
        (
            RESTORE_VM,
            "virtualmachines.kubevirt.io vm-workloads/rhel9-cache-02",
        ),
        (
            RESTORE_PVC,
            "persistentvolumeclaims vm-workloads/batch-scratch-7",
        ),
        (
            RESTORE_PVC,
            "persistentvolumeclaims vm-workloads/fedora-web-01-rootdisk",
        ),
        (
            RESTORE_PVC,
            "persistentvolumeclaims vm-workloads/persistent-state-for-fedora-web-01-x7k2p",
        ),
        (
            RESTORE_PVC,
            "persistentvolumeclaims vm-workloads/persistent-state-for-win2k22-sql",
        ),
        (
            RESTORE_PVC,
            "persistentvolumeclaims vm-workloads/scratch-import",
        ),
        (
            RESTORE_PVC,
            "persistentvolumeclaims vm-workloads/web-content",
        ),
        (
            RESTORE_PVC,
            "persistentvolumeclaims vm-workloads/web-logs",
        ),
        (
            RESTORE_VS,
            "volumesnapshots.snapshot.storage.k8s.io vm-workloads/velero-fedora-web-01-rootdisk-4xk9p",
        ),
    ]
    .into_iter()
    .map(|(a, i)| (a.to_string(), i.to_string()))
    .collect();
    assert_eq!(differing(&report), expected);
    assert_eq!(report["differences"], 25);

    // The differences are JSON pointers into the result: additional items by name, never by position.
    let dv = report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == DV)
        .unwrap();
    let scratch = dv["differing"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "scratch-import")
        .unwrap();
    let paths: Vec<&str> = scratch["patch"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| {
            assert_eq!(op["op"], "remove");
            op["path"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        paths,
        [
            "/additionalItems/configmaps vm-workloads~1image-mirror-ca",
            "/additionalItems/secrets vm-workloads~1image-mirror-credentials"
        ]
    );

    // The table says the same for people.
    let out = velero_wasm(&["diff", &archive, "--new", &modules]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    assert!(
        text.contains("    remove  /additionalItems/configmaps vm-workloads/image-mirror-ca"),
        "{text}"
    );
    assert!(text.contains("different: 25 differing results"), "{text}");
}

#[test]
fn a_packed_configmap_is_a_module_set_as_its_directory_is() {
    let (dir, archive) = fixture_archive();
    let modules = upstream_override(dir.path());
    let packed = dir.path().join("kubevirt.yaml");
    let out = velero_wasm(&[
        "module",
        "pack",
        &modules,
        "--out",
        &packed.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let from_file = velero_wasm(&[
        "diff",
        &archive,
        "--new",
        &packed.display().to_string(),
        "--json",
    ]);
    assert_eq!(from_file.status.code(), Some(1), "{}", stderr(&from_file));
    let from_dir = velero_wasm(&["diff", &archive, "--new", &modules, "--json"]);
    assert_eq!(
        differing(&stdout_json(&from_file)),
        differing(&stdout_json(&from_dir))
    );
    // The old set can be the candidate too: the same items differ.
    let reversed = velero_wasm(&[
        "diff", &archive, "--old", &modules, "--new", "stock", "--json",
    ]);
    assert_eq!(reversed.status.code(), Some(1), "{}", stderr(&reversed));
    assert_eq!(
        differing(&stdout_json(&reversed)),
        differing(&stdout_json(&from_dir))
    );
}

#[test]
fn a_directory_of_manifests_is_a_backup_too() {
    let cluster = root().join("tests/fixtures/kubevirt/cluster");
    let out = velero_wasm(&[
        "diff",
        &cluster.display().to_string(),
        "--new",
        "stock",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["items"], 29);
}

#[test]
fn bad_input_exits_2_saying_what_is_wrong() {
    let (dir, archive) = fixture_archive();
    let expect = |args: &[&str], message: &str| {
        let out = velero_wasm(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
    };
    let missing = dir.path().join("missing.tar.gz").display().to_string();
    expect(&["diff", &missing, "--new", "stock"], "missing.tar.gz");

    // Gzip, but not a tar of Velero's layout.
    let other = dir.path().join("other.tar.gz");
    {
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&other).unwrap(),
            flate2::Compression::fast(),
        );
        let mut tar = tar::Builder::new(gz);
        let mut header = tar::Header::new_gnu();
        header.set_size(2);
        header.set_cksum();
        tar.append_data(&mut header, "notes/a.json", &b"{}"[..])
            .unwrap();
        tar.into_inner().unwrap().finish().unwrap();
    }
    let other = other.display().to_string();
    expect(
        &["diff", &other, "--new", "stock"],
        "not a Velero backup archive",
    );

    // Gzip of something that is not a tar at all.
    let garbage = dir.path().join("garbage.tar.gz");
    {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&garbage).unwrap(),
            flate2::Compression::fast(),
        );
        gz.write_all(&[0x55; 1024]).unwrap();
        gz.finish().unwrap();
    }
    expect(
        &["diff", &garbage.display().to_string(), "--new", "stock"],
        "garbage.tar.gz",
    );

    expect(
        &["diff", &archive, "--new", "/no/such/set"],
        "--new /no/such/set: cannot be read",
    );

    // A set whose module does not load: compared, it would be something else than what was asked.
    let broken = dir.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(broken.join("kubevirt.toml"), "[settings\n").unwrap();
    let broken = broken.display().to_string();
    expect(
        &["diff", &archive, "--new", &broken],
        &format!("--new {broken}: does not load as given"),
    );

    // A file that is neither `stock`, a directory nor ConfigMaps.
    let pod = root().join("tests/fixtures/kubevirt/cluster/pod-virt-launcher-fedora-web-01.json");
    expect(
        &[
            "diff",
            &archive,
            "--old",
            &pod.display().to_string(),
            "--new",
            "stock",
        ],
        "document 1 (Pod virt-launcher-fedora-web-01-q7m2x): is not a ConfigMap",
    );
    expect(&["diff", &archive], "--new");
}

#[test]
fn actions_only_one_set_has_are_named_and_restore_actions_are_compared() {
    let (dir, archive) = fixture_archive();
    let modules = upstream_override(dir.path());
    let out = velero_wasm(&["diff", &archive, "--new", &modules, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = stdout_json(&out);
    assert_eq!(
        report["onlyInOld"],
        serde_json::json!([BLOCK_POD, BLOCK_VMI, RESTORE_OPERATION]),
        "{report:#}"
    );
    assert_eq!(report["onlyInNew"], serde_json::json!([]));
    let action = |name: &str| {
        report["actions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["action"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {report:#}"))
    };
    let restore = action(RESTORE_VM);
    assert_eq!(
        (&restore["kind"], &restore["items"], &restore["inNew"]),
        (
            &serde_json::json!("restore"),
            &serde_json::json!(3),
            &serde_json::json!(true)
        )
    );
    let block = action(BLOCK_VMI);
    assert_eq!(
        (&block["inOld"], &block["inNew"]),
        (&serde_json::json!(true), &serde_json::json!(false))
    );
    for d in block["differing"].as_array().unwrap() {
        assert_eq!(
            d["cause"],
            serde_json::json!({"set": "new", "why": "missing-action"}),
            "{d:#}"
        );
    }

    // The table says it in words, never as a patch replacing the whole result with nothing.
    let out = support::run::Run::cli(["diff", &archive, "--new", &modules])
        .env("COLUMNS", "200")
        .output();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("replace  null"), "{text}");
    assert!(
        text.contains(&format!(
            "only in --old stock: {BLOCK_POD} (item-block), {BLOCK_VMI} (item-block), {RESTORE_OPERATION} (restore)"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "--new {modules} has no such action: its result on 3 items is compared with nothing"
        )),
        "{text}"
    );
    // COLUMNS is followed: some line is longer than the 100 columns of a pipe.
    assert!(text.lines().any(|l| l.chars().count() > 100), "{text}");
}

/// The fixture archive's tar, uncompressed.
fn fixture_tar() -> Vec<u8> {
    let (_dir, archive) = fixture_archive();
    let mut tar = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&archive).unwrap()),
        &mut tar,
    )
    .unwrap();
    tar
}

/// `parts` gzipped one member each, concatenated (as `cat a.gz b.gz` makes).
fn gzip_members(parts: &[&[u8]], path: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).unwrap();
    for part in parts {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(part).unwrap();
        file.write_all(&gz.finish().unwrap()).unwrap();
    }
}

/// `diff` of `backup` against the stock set, killed after 60 s (a hang is a failure, not a stall).
fn diff_within_a_minute(backup: &str) -> std::process::Output {
    within_a_minute(support::run::Run::cli(["diff", backup, "--new", "stock"]))
}

/// Runs `run` to its end, killed after 60 s (a hang is a failure, not a stall).
fn within_a_minute(run: support::run::Run) -> std::process::Output {
    let mut child = run
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("still running after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn every_member_of_a_multi_member_gzip_archive_is_read() {
    // Go's gzip reader, and so Velero, reads the members one after the other as one stream.
    let tar = fixture_tar();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("members.tar.gz");
    let half = tar.len() / 2;
    gzip_members(&[&tar[..half], &tar[half..]], &path);
    let backup = path.display().to_string();
    let out = velero_wasm(&["diff", &backup, "--new", "stock"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with(&format!("29 items of {backup}")), "{text}");
}

#[test]
fn a_fifo_as_backup_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("backup.tar.gz");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let backup = fifo.display().to_string();
    let out = diff_within_a_minute(&backup);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a regular file nor a directory"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn tar_extension_headers_past_the_limit_are_refused_before_they_are_read() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, what) in [
        (tar::EntryType::GNULongName, "GNU long name (L)"),
        (tar::EntryType::GNULongLink, "GNU long link name (K)"),
        (tar::EntryType::XHeader, "PAX (x)"),
    ] {
        // A header that says 3 GiB over a short stream: read whole, it would be a 3 GiB allocation.
        let mut header = tar::Header::new_gnu();
        header.set_path("././@LongLink").unwrap();
        header.set_entry_type(kind);
        header.set_size(3 << 30);
        header.set_mode(0o644);
        header.set_cksum();
        // After the archive's first entry, metadata/version (a header and one block of data).
        let mut tar = fixture_tar();
        tar.truncate(1024);
        tar.extend_from_slice(header.as_bytes());
        tar.extend_from_slice(&[b'a'; 64 << 10]);
        let path = dir
            .path()
            .join(format!("{}.tar.gz", kind.as_byte() as char));
        gzip_members(&[&tar], &path);
        let out = diff_within_a_minute(&path.display().to_string());
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!(
                "a {what} header of 3221225472 bytes, over the 65536-byte limit of one"
            )),
            "{what}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn long_names_in_gnu_and_pax_headers_name_items() {
    // Go's writer uses a PAX `path` record for a name past the ustar fields, GNU tar an `L` header.
    let objects = fixture_objects();
    let item = |object: &Value| {
        let id = ItemRef::parse(&object.to_string()).unwrap();
        (serde_json::to_vec(object).unwrap(), id)
    };
    let (bytes, id) = item(&objects[0]);
    let (other_bytes, other) = item(&objects[1]);
    let long = "n".repeat(200);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.tar.gz");
    {
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&path).unwrap(),
            flate2::Compression::fast(),
        );
        let mut tar = tar::Builder::new(gz);
        let mut header = tar::Header::new_gnu();
        header.set_size(6);
        header.set_cksum();
        tar.append_data(&mut header, "metadata/version", &b"1.1.0\n"[..])
            .unwrap();
        // GNU: append_data writes an `L` header for a name this long.
        let gnu = format!(
            "resources/{}/namespaces/{long}/{}.json",
            id.group_resource(),
            id.name
        );
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_cksum();
        tar.append_data(&mut header, &gnu, &bytes[..]).unwrap();
        // PAX: a `path` record, then a ustar header with a short name.
        let pax = format!(
            "resources/{}/namespaces/{long}x/{}.json",
            other.group_resource(),
            other.name
        );
        let body = format!(" path={pax}\n");
        let mut record = format!("{}{body}", body.len() + 3);
        if record.len() != body.len() + 3 {
            record = format!("{}{body}", body.len() + 4);
        }
        let mut header = tar::Header::new_ustar();
        header.set_path("PaxHeaders/short.json").unwrap();
        header.set_entry_type(tar::EntryType::XHeader);
        header.set_size(record.len() as u64);
        header.set_cksum();
        tar.append(&header, record.as_bytes()).unwrap();
        let mut header = tar::Header::new_ustar();
        header.set_path("short.json").unwrap();
        header.set_size(other_bytes.len() as u64);
        header.set_cksum();
        tar.append(&header, &other_bytes[..]).unwrap();
        tar.into_inner().unwrap().finish().unwrap();
    }
    let backup = path.display().to_string();
    let out = velero_wasm(&["diff", &backup, "--new", "stock"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with(&format!("2 items of {backup}")), "{text}");
}

#[test]
fn items_that_would_parse_past_the_memory_bound_are_refused_before_they_are_kept() {
    // Five ConfigMaps of 7.5 MiB each, every one an array of zeros: small as text (and as an archive),
    // four million values each once parsed. Read whole, four such items took diff past 1 GiB.
    let dir = tempfile::tempdir().unwrap();
    let zeros = vec!["0"; 3_900_000].join(",");
    let objects: Vec<Value> = (0..5)
        .map(|i| {
            serde_json::from_str(&format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"zeros-{i}","namespace":"apps"}},"zeros":[{zeros}]}}"#
            ))
            .unwrap()
        })
        .collect();
    let path = dir.path().join("zeros.tar.gz");
    velero_archive(&objects, &path);
    let out = diff_within_a_minute(&path.display().to_string());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // Refused at the first: parsing it alone takes more than the bound.
    assert!(
        stderr(&out).contains(
            "resources/configmaps/namespaces/apps/zeros-0.json: the items up to this one would take"
        ) && stderr(&out).contains("over the 160 MiB diff takes for a backup's items"),
        "{}",
        stderr(&out)
    );
}

/// An archive of one ConfigMap per element, each holding an array of as many copies of `element` as
/// fit in the 8 MiB an item may have: items `diff` reads, whose parse takes many times their size.
fn dense_archive(path: &Path, elements: &[&str]) {
    let objects: Vec<Value> = elements
        .iter()
        .enumerate()
        .map(|(i, element)| {
            let head = format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"dense-{i}","namespace":"apps"}},"dense":["#
            );
            let n = ((8 << 20) - head.len() - 2) / (element.len() + 1);
            let text = format!("{head}{}]}}", vec![*element; n].join(","));
            assert!(text.len() <= 8 << 20);
            serde_json::from_str(&text).unwrap()
        })
        .collect();
    velero_archive(&objects, path);
}

#[test]
fn one_item_under_the_size_cap_whose_parse_passes_the_memory_bound_is_refused_naming_it() {
    // Issue 55: an 8 KiB archive of one 8 MiB item of zeros or of empty objects took diff past a
    // 512 MiB container (hundreds of MiB per parsed copy); three such items past 1 GiB. Each shape
    // is refused at its entry, with the bound, and nothing is left in the temporary directory.
    let dir = tempfile::tempdir().unwrap();
    for (shape, elements) in [
        ("zeros", &["0"][..]),
        ("empty strings", &["\"\""][..]),
        ("empty objects", &["{}"][..]),
        ("empty arrays", &["[]"][..]),
        ("the three of the issue", &["0", "\"\"", "{}"][..]),
    ] {
        let path = dir.path().join("dense.tar.gz");
        dense_archive(&path, elements);
        let tmp = tempfile::tempdir().unwrap();
        let backup = path.display().to_string();
        let run =
            support::run::Run::cli(["diff", &backup, "--new", "stock"]).env("TMPDIR", tmp.path());
        let out = within_a_minute(run);
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{shape}: {said}");
        assert!(
            said.contains("resources/configmaps/namespaces/apps/dense-0.json: the items up to this one would take")
                && said.contains("over the 160 MiB diff takes for a backup's items"),
            "{shape}: {said}"
        );
        assert!(out.stdout.is_empty(), "{shape}");
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert!(left.is_empty(), "{shape}: left behind {left:?}");
    }
}

#[test]
fn a_diff_killed_while_it_compares_leaves_no_temporary_directory() {
    // SIGKILL (or the OOM killer) runs no destructor: whatever diff keeps on disk stays there.
    let (_dir, archive) = fixture_archive();
    // The ConfigMap's first misbehave action sleeps until its deadline: diff is still comparing.
    let modules = support::module_dir(
        "misbehave",
        "misbehave",
        "[settings]\ninstead = \"counter:sleep\"\n",
    );
    let tmp = tempfile::tempdir().unwrap();
    let set = modules.path().display().to_string();
    let mut child =
        support::run::Run::cli(["--log-level", "debug", "diff", &archive, "--new", &set])
            .env("TMPDIR", tmp.path())
            .command()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
    // Each call's log line names its action: once one is there, items are being compared.
    let lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let comparing = std::iter::from_fn(|| rx.recv_timeout(std::time::Duration::from_secs(60)).ok())
        .any(|line| line.contains("action="));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        comparing,
        "diff said no call before it ended or within 60 s"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind {left:?}");
}

/// docs/modules.md §9, run as written: `module export`, the edits, `diff` on a backup archive (exit
/// 1, the items upstream mode changes), `module pack --shadow --sign`, `module verify` and `diff` of
/// the packed file as the commands are written; then what the `kubectl` lines do, against the
/// loopback API server holding the KubeVirt fixtures: the shadow applied, a plugin trusting the key
/// serving stock kubevirt to a backup Execute while the shadow differs, `status` counting it, and,
/// the shadow label removed, the next plugin serving the candidate. The archive stands in for the
/// one `aws s3 cp` fetches, the key for the operator's `ops.key`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_modules_walkthrough_runs_as_written() {
    let doc = std::fs::read_to_string(root().join("docs/modules.md")).unwrap();
    let section = doc
        .split("## 9. Walkthrough")
        .nth(1)
        .expect("docs/modules.md has §9");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("§9 opens with a sh block");
    let dir = tempfile::tempdir().unwrap();
    velero_archive(
        &fixture_objects(),
        &dir.path().join("nightly-20261202.tar.gz"),
    );
    let keygen = support::run::Run::cli(["module", "keygen", "--out", "ops"])
        .command()
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(keygen.status.success(), "{}", stderr(&keygen));
    let bin_dir = Path::new(support::run::binary()).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = Vec::new();
    for line in block.lines() {
        let command = line.split(" #").next().unwrap_or("").trim();
        if command.is_empty()
            || command.starts_with('#')
            || command.starts_with("aws ")
            || command.starts_with("kubectl ")
        {
            continue;
        }
        let mut sh = std::process::Command::new("sh");
        support::run::hermetic(&mut sh)
            .args(["-c", command])
            .current_dir(dir.path())
            .env("PATH", &path)
            .stdin(std::process::Stdio::null());
        let out = sh.output().unwrap();
        // The first diff finds the items upstream mode changes (exit 1), as §9 says; so does the
        // diff of the packed file; everything else succeeds.
        let expected = if command.starts_with("velero-wasm diff") {
            1
        } else {
            0
        };
        assert_eq!(
            out.status.code(),
            Some(expected),
            "`{command}`:\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        );
        ran.push(command.to_string());
    }
    assert_eq!(ran.len(), 7, "{ran:#?}");
    // The shadow ConfigMap as packed: signed, a shadow, version 0.1.1, upstream mode.
    let packed = std::fs::read_to_string(dir.path().join("kubevirt-shadow.yaml")).unwrap();
    let data = packed.split("\ndata:").nth(1).unwrap_or_default();
    assert!(
        packed.contains("velero-wasm.io/shadow: 'true'"),
        "not a shadow"
    );
    for wanted in ["kubevirt.sig", "0.1.1", "upstream"] {
        assert!(data.contains(wanted), "no {wanted} in its data:\n{data}");
    }
    // 4's `kubectl apply`: the shadow ConfigMap into the API server.
    let mut shadow: Value = serde_norway::from_str(&packed).unwrap();
    let server =
        support::apiserver::ApiServer::start(&[&root().join("tests/fixtures/kubevirt/cluster")]);
    server.apply(shadow.clone());
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig);
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let public = dir.path().join("ops.pub");
    let start = || {
        support::plugin::Plugin::reading_configmaps(
            &kubeconfig,
            &state,
            "velero",
            &[("VELERO_WASM_TRUSTED_KEYS", public.to_str().unwrap())],
        )
    };

    // 5: backups run; stock kubevirt answers them, the shadow is compared. One Execute of an item
    // whose result step 3 showed to differ.
    let out = velero_wasm(&[
        "diff",
        &dir.path()
            .join("nightly-20261202.tar.gz")
            .display()
            .to_string(),
        "--new",
        &dir.path().join("candidate").display().to_string(),
        "--json",
    ]);
    let report = stdout_json(&out);
    let (action, differing) = report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "backup")
        .find_map(|a| Some((a["action"].as_str()?, a["differing"].as_array()?.first()?)))
        .unwrap_or_else(|| panic!("no backup action differs: {report:#}"));
    let item = fixture_objects()
        .into_iter()
        .find(|o| {
            o["metadata"]["name"] == differing["name"]
                && o["metadata"]["namespace"] == differing["namespace"]
        })
        .unwrap_or_else(|| panic!("no fixture object for {differing}"));
    let plugin = start();
    let backup = json!({"apiVersion": "velero.io/v1", "kind": "Backup",
                        "metadata": {"name": "nightly-20261203", "namespace": "velero", "uid": "b-uid-9"},
                        "spec": {}});
    BackupItemActionClient::new(plugin.channel().await)
        .execute(ExecuteRequest {
            plugin: action.to_string(),
            item: item.to_string().into_bytes(),
            backup: backup.to_string().into_bytes(),
        })
        .await
        .unwrap_or_else(|e| panic!("{action}: {e}"));
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        let out = velero_wasm(&["status", "--state-dir", state.to_str().unwrap(), "--json"]);
        if out.status.success() {
            let status = stdout_json(&out);
            if status["shadows"]["kubevirt"]["differing"].as_u64() >= Some(1) {
                break status;
            }
        }
        assert!(
            std::time::Instant::now() < until,
            "the shadow's difference never showed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let roles: BTreeSet<(String, String)> = status["modules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["name"] == "kubevirt")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["source"].as_str().unwrap().to_string(),
            )
        })
        .map(|(role, source)| (role, source.split('@').next().unwrap().to_string()))
        .collect();
    assert_eq!(
        roles,
        BTreeSet::from([
            ("serving".to_string(), "stock".to_string()),
            (
                "shadow".to_string(),
                "ConfigMap velero-wasm-module-kubevirt-shadow".to_string()
            ),
        ])
    );
    plugin.shutdown().await;

    // 6: promoted (the shadow label removed): the next plugin process serves the candidate.
    shadow["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("velero-wasm.io/shadow");
    server.apply(shadow);
    let plugin = start();
    plugin.list().await;
    let session = plugin.shutdown().await;
    let line = session
        .log_lines()
        .into_iter()
        .find(|l| l["@message"] == "modules in service")
        .unwrap_or_else(|| panic!("no `modules in service` line:\n{}", session.stderr));
    assert!(
        line["modules"]
            .as_str()
            .unwrap()
            .contains("kubevirt: ConfigMap velero-wasm-module-kubevirt-shadow@"),
        "{line:?}"
    );
}
