//! Misbehaviour on demand, one action per case, for the host's robustness tests. Every action is a
//! backup action on ConfigMaps; `test.velero-wasm.io/echo` behaves, so a test can check that the host
//! still serves after each misbehaviour.

use velero_wasm_sdk::*;

struct Misbehave;

const CASES: &[(&str, &str)] = &[
    (
        "echo",
        "returns the item unchanged and names one additional item",
    ),
    ("trap", "panics"),
    ("loop", "spins forever"),
    ("sleep", "sleeps forever in the clock capability"),
    ("memory-bomb", "allocates until memory runs out"),
    ("forbidden-kube", "reads a Secret it was not granted"),
    (
        "granted-kube",
        "reads the ConfigMap named by setting `target` in the item's namespace",
    ),
    ("huge-output", "returns an item of 2 MiB"),
    ("malformed-output", "returns text that is not JSON"),
    ("kindless-output", "returns a JSON object without kind"),
    ("exit", "calls std::process::exit"),
    ("log", "logs at every level"),
    ("stdout", "prints to stdout"),
];

impl Plugin for Misbehave {
    fn describe() -> Vec<ActionInfo> {
        CASES
            .iter()
            .map(|(name, what)| {
                ActionInfo::new(&format!("test.velero-wasm.io/{name}"), Kind::Backup)
                    .applies_to(Selector::resources(&["configmaps"]))
                    .description(what)
            })
            .collect()
    }

    fn backup(action: &str, request: BackupRequest) -> Result<BackupResponse, String> {
        let case = action
            .strip_prefix("test.velero-wasm.io/")
            .unwrap_or(action);
        match case {
            "echo" => {
                let item = Object::parse(&request.item)?;
                Ok(BackupResponse::unchanged().additional(vec![ResourceId::new(
                    "",
                    "secrets",
                    item.namespace(),
                    item.name(),
                )]))
            }
            "trap" => panic!("deliberate panic in {case}"),
            "loop" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "sleep" => loop {
                clock::sleep(std::time::Duration::from_secs(3600));
            },
            "memory-bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "forbidden-kube" => {
                let item = Object::parse(&request.item)?;
                match HostCluster.get(
                    Api::new("", "v1", "secrets"),
                    item.namespace(),
                    "credentials",
                ) {
                    Ok(_) => Err("the host let a forbidden read through".into()),
                    Err(e) => Err(format!("kube: {e:?}")),
                }
            }
            "granted-kube" => {
                let item = Object::parse(&request.item)?;
                let target = config::get("target").ok_or("setting `target` is not set")?;
                let found = HostCluster
                    .get(Api::new("", "v1", "configmaps"), item.namespace(), &target)
                    .map_err(|e| format!("kube: {e:?}"))?;
                let mut out = item.clone();
                out.set_annotation("test.velero-wasm.io/found", found.name());
                Ok(BackupResponse::with_item(&out))
            }
            "huge-output" => {
                let mut item = Object::parse(&request.item)?;
                item.set_annotation("padding", &"x".repeat(2 << 20));
                Ok(BackupResponse::with_item(&item))
            }
            "malformed-output" => Ok(BackupResponse {
                item: Some("{\"kind\": \"ConfigMap\", ".into()),
                ..BackupResponse::unchanged()
            }),
            "kindless-output" => Ok(BackupResponse {
                item: Some("{\"metadata\": {}}".into()),
                ..BackupResponse::unchanged()
            }),
            "exit" => std::process::exit(3),
            "log" => {
                log::debug("debug line", &[("case", case)]);
                log::info("info line", &[("case", case)]);
                log::warn("warn line", &[("case", case)]);
                log::error("error line", &[("case", case)]);
                Ok(BackupResponse::unchanged())
            }
            "stdout" => {
                println!("this must not reach the host's stdout");
                eprintln!("guest stderr line");
                Ok(BackupResponse::unchanged())
            }
            other => Err(format!("no such case: {other}")),
        }
    }
}

export_plugin!(Misbehave);
