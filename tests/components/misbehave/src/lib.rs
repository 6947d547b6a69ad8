//! Misbehaviour on demand, one action per case, for the host's robustness tests. Every action is a
//! backup action on ConfigMaps; `test.velero-wasm.io/echo` behaves, so a test can check that the host
//! still serves after each misbehaviour. The setting `domain` replaces `test.velero-wasm.io` in the
//! action names, so that one process can load the component twice under different limits; the setting
//! `instead` (`echo:label,…`) makes an action run another case; the setting `cases` (`label,trail`)
//! describes only those cases, so that a copy can add a few well-behaved actions (the slot's tests), and
//! `resources` (`persistentvolumeclaims,pods`) names what they apply to instead of ConfigMaps.

use velero_wasm_sdk::*;

struct Misbehave;

const CASES: &[(&str, &str)] = &[
    (
        "echo",
        "returns the item unchanged and names one additional item",
    ),
    (
        "label",
        "parses the item, sets a label, returns it (the benchmark's unit of JSON work)",
    ),
    (
        "trail",
        "appends its own name to the item's annotation velero-wasm.io/trail (shows the order of a chain)",
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
    (
        "counter",
        "counts its calls in a static and reports the count (1 if instances are fresh)",
    ),
    (
        "write",
        "creates <name>-copy of the item, then labels it with a merge patch",
    ),
    (
        "log-fields",
        "logs one error line with 1000 fields of 4 KiB",
    ),
    (
        "log-flood",
        "logs 1000 lines of an 8 KiB message and 8 fields of 4 KiB",
    ),
    (
        "kube-calls",
        "reads the ConfigMap named by setting `target` 5000 times, ignoring errors",
    ),
    (
        "list",
        "lists the ConfigMaps of the item's namespace and annotates the item with their number",
    ),
    (
        "field-selector",
        "lists ConfigMaps with a field selector of 10 000 terms",
    ),
    (
        "label-selector",
        "lists ConfigMaps with a label selector of 10 000 requirements",
    ),
];

const DOMAIN: &str = "test.velero-wasm.io";

static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Plugin for Misbehave {
    fn describe() -> Vec<ActionInfo> {
        let only = config::get("cases");
        let wanted = |case: &str| {
            only.as_deref()
                .is_none_or(|only| only.split(',').any(|c| c.trim() == case))
        };
        let resources = config::get("resources").unwrap_or_else(|| "configmaps".to_string());
        let resources: Vec<&str> = resources.split(',').map(str::trim).collect();
        CASES
            .iter()
            .filter(|(name, _)| wanted(name))
            .map(|(name, what)| {
                let domain = config::get("domain").unwrap_or_else(|| DOMAIN.to_string());
                ActionInfo::new(&format!("{domain}/{name}"), Kind::Backup)
                    .applies_to(Selector::resources(&resources))
                    .description(what)
            })
            .collect()
    }

    fn backup(action: &str, request: BackupRequest) -> Result<BackupResponse, String> {
        let case = action.rsplit_once('/').map_or(action, |(_, case)| case);
        // Setting `instead` ("echo:label,counter:trap"): an action runs another case, so that a
        // candidate of this module (a shadow) can differ from the serving one under the same names.
        let instead = config::get("instead").and_then(|pairs| {
            pairs.split(',').find_map(|pair| {
                let (from, to) = pair.split_once(':')?;
                (from.trim() == case).then(|| to.trim().to_string())
            })
        });
        let case = instead.as_deref().unwrap_or(case);
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
            "label" => {
                let mut item = Object::parse(&request.item)?;
                item.set_label("velero-wasm.io/seen", "true");
                Ok(BackupResponse::with_item(&item))
            }
            "trail" => {
                let mut item = Object::parse(&request.item)?;
                let trail = match item.annotation("velero-wasm.io/trail") {
                    Some(before) => format!("{before},{action}"),
                    None => action.to_string(),
                };
                item.set_annotation("velero-wasm.io/trail", &trail);
                Ok(BackupResponse::with_item(&item))
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
            // Reached only through `instead`: an item of 60 MB of `[0,0,…]`, within the 64 MiB
            // output limit, for a shadow whose answer is too large to compare parsed (`make memory`).
            "giant-output" => {
                let rest = request
                    .item
                    .trim_start()
                    .strip_prefix('{')
                    .ok_or("the item is not a JSON object")?;
                let mut item = String::with_capacity(60_000_100 + rest.len());
                item.push_str("{\"zeros\":[0");
                for _ in 1..30_000_000 {
                    item.push_str(",0");
                }
                item.push_str("],");
                item.push_str(rest);
                Ok(BackupResponse {
                    item: Some(item),
                    ..BackupResponse::unchanged()
                })
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
            "counter" => {
                let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                let mut item = Object::parse(&request.item)?;
                item.set_annotation("test.velero-wasm.io/calls", &n.to_string());
                Ok(BackupResponse::with_item(&item))
            }
            "write" => {
                let item = Object::parse(&request.item)?;
                let api = Api::new("", "v1", "configmaps");
                let mut copy =
                    Object::parse(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#)?;
                copy.set("/metadata/name", format!("{}-copy", item.name()).into())?;
                copy.set("/data", item.pointer("/data").cloned().unwrap_or_default())?;
                HostCluster
                    .create(api, item.namespace(), &copy)
                    .map_err(|e| format!("create: {e:?}"))?;
                let patch = serde_json::json!({"metadata": {"labels": {"copied": "true"}}});
                HostCluster
                    .merge_patch(api, item.namespace(), copy.name(), &patch)
                    .map_err(|e| format!("patch: {e:?}"))?;
                Ok(BackupResponse::unchanged())
            }
            "log-fields" => {
                let value = "v".repeat(4 << 10);
                let keys: Vec<String> = (0..1000).map(|i| format!("field{i}")).collect();
                let fields: Vec<(&str, &str)> =
                    keys.iter().map(|k| (k.as_str(), value.as_str())).collect();
                log::error("one line with 1000 fields", &fields);
                Ok(BackupResponse::unchanged())
            }
            "log-flood" => {
                let message = "m".repeat(8 << 10);
                let value = "v".repeat(4 << 10);
                let keys: Vec<String> = (0..8).map(|i| format!("field{i}")).collect();
                let fields: Vec<(&str, &str)> =
                    keys.iter().map(|k| (k.as_str(), value.as_str())).collect();
                for _ in 0..1000 {
                    log::info(&message, &fields);
                }
                Ok(BackupResponse::unchanged())
            }
            "kube-calls" => {
                let item = Object::parse(&request.item)?;
                let target = config::get("target").ok_or("setting `target` is not set")?;
                let api = Api::new("", "v1", "configmaps");
                let mut refused = 0;
                for _ in 0..5000 {
                    if HostCluster.get(api, item.namespace(), &target).is_err() {
                        refused += 1;
                    }
                }
                // A module that carries on after its calls are refused still fails.
                let mut out = item.clone();
                out.set_annotation("test.velero-wasm.io/refused", &refused.to_string());
                Ok(BackupResponse::with_item(&out))
            }
            "list" => {
                let item = Object::parse(&request.item)?;
                let listed = HostCluster
                    .list(Api::new("", "v1", "configmaps"), item.namespace(), "")
                    .map_err(|e| format!("kube: {e:?}"))?;
                let mut out = item.clone();
                out.set_annotation("test.velero-wasm.io/listed", &listed.len().to_string());
                Ok(BackupResponse::with_item(&out))
            }
            "field-selector" | "label-selector" => {
                use velero_wasm_sdk::bindings::velero_wasm::plugin::kube;
                let item = Object::parse(&request.item)?;
                let terms: Vec<String> = (0..10_000)
                    .map(|i| match case {
                        "field-selector" => format!("metadata.name!=n{i}"),
                        _ => format!("k{i}!=v"),
                    })
                    .collect();
                let selector = terms.join(",");
                let (label_selector, field_selector) = match case {
                    "field-selector" => (String::new(), selector),
                    _ => (selector, String::new()),
                };
                let options = kube::ListOptions {
                    label_selector,
                    field_selector,
                };
                let api = kube::ApiResource {
                    group: String::new(),
                    version: "v1".into(),
                    resource: "configmaps".into(),
                };
                match kube::list(&api, item.namespace(), &options) {
                    Ok(listed) => Err(format!("the host listed {} objects", listed.len())),
                    Err(e) => Err(format!("kube: {e:?}")),
                }
            }
            other => Err(format!("no such case: {other}")),
        }
    }
}

export_plugin!(Misbehave);
