//! `velero-wasm bench`: what one action costs on one item. The inputs are `run`'s; the action is
//! called as `run` calls it (a fresh instance per call, as served), warm-up calls first, then `-n`
//! measured calls. Prints median, p90 and p99 of a call, the part of it that is instantiation, the
//! capability calls each call made, and the machine; `--json` for scripts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{json, Value};

use super::failure::{Failure, EXIT_OK};
use super::run::{self, RunArgs};
use crate::backend::{Backend, Call};
use crate::capabilities::Services;

/// Arguments of `bench`: those of `run`, and how many calls.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    #[command(flatten)]
    run: RunArgs,

    /// Calls measured, after the warm-up.
    #[arg(short = 'n', long = "calls", value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    calls: u32,

    /// Calls made first and not measured (compilation caches, allocator, CPU caches).
    #[arg(long, value_name = "W", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    warmup: u32,

    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the command; returns the exit status.
pub(crate) async fn bench(args: BenchArgs, config: &crate::config::Config) -> u8 {
    match measure(args, config).await {
        Ok(()) => EXIT_OK,
        Err(failure) => {
            eprintln!("velero-wasm bench: {}", failure.message);
            failure.code
        }
    }
}

/// Median, p90 and p99 of samples.
struct Spread {
    median: Duration,
    p90: Duration,
    p99: Duration,
}

impl Spread {
    fn of(mut samples: Vec<Duration>) -> Spread {
        samples.sort();
        let at = |q: f64| {
            let rank = (q * samples.len() as f64).ceil() as usize;
            samples
                .get(rank.clamp(1, samples.len().max(1)) - 1)
                .copied()
                .unwrap_or_default()
        };
        Spread {
            median: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
        }
    }

    fn json(&self) -> Value {
        json!({
            "medianUs": micros(self.median),
            "p90Us": micros(self.p90),
            "p99Us": micros(self.p99),
        })
    }
}

/// How this binary was built, since a debug host makes every figure larger.
const HOST_BUILD: &str = if cfg!(debug_assertions) {
    "debug"
} else {
    "release"
};

fn micros(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e7).round() / 10.0
}

async fn measure(args: BenchArgs, config: &crate::config::Config) -> Result<(), Failure> {
    if args.run.record.is_some() || args.run.replay.is_some() {
        return Err(Failure::bad_input(
            "bench measures against a fixture (--cluster) or a live cluster; --record and --replay are for run",
        ));
    }
    let item = item_label(&args.run);
    let action = args.run.action.clone();
    let counter = Arc::new(AtomicU64::new(0));
    let wrap = {
        let counter = counter.clone();
        move |services: Services| counted(services, &counter)
    };
    let prepared = run::prepare(args.run, wrap, config).await?;
    let (served, per_call) = time_calls(&prepared, &counter, args.warmup, args.calls).await?;
    let instantiate = time_instantiation(&prepared, &action, args.calls).await?;
    let figures = Figures {
        action,
        item,
        calls: args.calls,
        warmup: args.warmup,
        served: Spread::of(served),
        instantiate: Spread::of(instantiate),
        per_call,
    };
    if args.json {
        figures.print_json();
    } else {
        figures.print_table();
    }
    Ok(())
}

/// What the table calls the item: its file's name, or the operation asked about.
fn item_label(run: &RunArgs) -> String {
    run.item
        .as_ref()
        .map(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| p.display().to_string())
        })
        .unwrap_or_else(|| format!("operation {}", run.operation_id.as_deref().unwrap_or("")))
}

/// `warmup` calls, then `calls` timed ones as served: the time of each and the capability calls each
/// made (counted by `counter`).
async fn time_calls(
    prepared: &run::Prepared,
    counter: &AtomicU64,
    warmup: u32,
    calls: u32,
) -> Result<(Vec<Duration>, Vec<u64>), Failure> {
    for n in 0..warmup {
        prepared
            .call()
            .await
            .map_err(|f| f.prefixed(&format!("warm-up call {} failed: ", n + 1)))?;
    }
    let mut served = Vec::with_capacity(calls as usize);
    let mut per_call = Vec::with_capacity(calls as usize);
    for n in 0..calls {
        let before = counter.load(Ordering::Relaxed);
        let start = Instant::now();
        let result = prepared.call().await;
        served.push(start.elapsed());
        result.map_err(|f| f.prefixed(&format!("call {} failed: ", n + 1)))?;
        per_call.push(counter.load(Ordering::Relaxed) - before);
    }
    Ok((served, per_call))
}

/// Instantiation alone: a fresh store and instance of the action's module, as every call makes.
async fn time_instantiation(
    prepared: &run::Prepared,
    action: &str,
    calls: u32,
) -> Result<Vec<Duration>, Failure> {
    let mut instantiate = Vec::with_capacity(calls as usize);
    for _ in 0..calls {
        let start = Instant::now();
        let instance = prepared
            .runtime()
            .warm_instance(action)
            .await
            .map_err(|e| Failure::failed(format!("cannot instantiate the module: {e:#}")))?;
        instantiate.push(start.elapsed());
        drop(instance);
    }
    Ok(instantiate)
}

/// What one `bench` measured.
struct Figures {
    action: String,
    item: String,
    calls: u32,
    warmup: u32,
    served: Spread,
    instantiate: Spread,
    per_call: Vec<u64>,
}

impl Figures {
    /// The call alone: per call as served − instantiation, medians.
    fn call(&self) -> Duration {
        self.served.median.saturating_sub(self.instantiate.median)
    }

    /// Capability calls: in all, and the fewest and most of one call.
    fn capability_calls(&self) -> (u64, u64, u64) {
        let total: u64 = self.per_call.iter().sum();
        let fewest = self.per_call.iter().copied().min().unwrap_or(0);
        let most = self.per_call.iter().copied().max().unwrap_or(0);
        (total, fewest, most)
    }

    fn print_json(&self) {
        let (cpu, cores) = machine();
        let (total, fewest, most) = self.capability_calls();
        let figures = json!({
            "action": self.action,
            "item": self.item,
            "calls": self.calls,
            "warmup": self.warmup,
            "machine": {"cpu": cpu, "cores": cores},
            "hostBuild": HOST_BUILD,
            "perCall": self.served.json(),
            "instantiate": self.instantiate.json(),
            "callMedianUs": micros(self.call()),
            "capabilityCalls": {"total": total, "perCallMin": fewest, "perCallMax": most},
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&figures)
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
        );
    }

    fn print_table(&self) {
        let (cpu, cores) = machine();
        let us = |d: Duration| format!("{:.1} µs", d.as_secs_f64() * 1e6);
        println!("{}", self.action);
        println!(
            "on {}: {} calls after {} warm-up calls",
            self.item, self.calls, self.warmup
        );
        println!("machine: {cpu}, {cores} cores");
        if cfg!(debug_assertions) {
            println!("host: a debug build: the host's side of each call (capabilities, JSON, instantiation)");
            println!("is slower than in a release build (the binary of the release image, the one Velero");
            println!("runs, or `cargo build --release` in a checkout); compare figures of release builds");
        }
        println!();
        println!("{:<44} {:>12} {:>12} {:>12}", "", "median", "p90", "p99");
        for (name, s) in [
            ("per call (instantiate + call, as served)", &self.served),
            ("instantiate (fresh store and instance)", &self.instantiate),
        ] {
            println!(
                "{name:<44} {:>12} {:>12} {:>12}",
                us(s.median),
                us(s.p90),
                us(s.p99)
            );
        }
        println!(
            "{:<44} {:>12}",
            "call (per call − instantiate, medians)",
            us(self.call())
        );
        println!();
        let (total, fewest, most) = self.capability_calls();
        let each = if fewest == most {
            format!("{fewest}")
        } else {
            format!("{fewest} to {most}")
        };
        println!(
            "capability calls per call: {each} ({total} in {} calls; kube, http, environment, random)",
            self.calls
        );
    }
}

/// The CPU model and the number of cores this process may use.
fn machine() -> (String, usize) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, model)| model.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    (cpu, cores)
}

/// `services` with every call of the kube, http, environment and random capabilities counted.
fn counted(mut services: Services, counter: &Arc<AtomicU64>) -> Services {
    services.kube = Arc::new(Counted(services.kube, counter.clone()));
    services.http = Arc::new(Counted(services.http, counter.clone()));
    services.random = Arc::new(Counted(services.random, counter.clone()));
    let source = Counted(services.environment.source(), counter.clone());
    services.environment = services.environment.with_source(Arc::new(source));
    services
}

/// A backend that counts the calls it passes on.
struct Counted<C: Call>(Arc<dyn Backend<C>>, Arc<AtomicU64>);

#[async_trait]
impl<C: Call> Backend<C> for Counted<C> {
    async fn call(&self, call: C) -> Result<C::Answer, C::Error> {
        self.1.fetch_add(1, Ordering::Relaxed);
        self.0.call(call).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_ranks_of_the_sorted_samples() {
        let samples: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        let s = Spread::of(samples);
        assert_eq!(
            (s.median, s.p90, s.p99),
            (
                Duration::from_millis(50),
                Duration::from_millis(90),
                Duration::from_millis(99)
            )
        );
        let one = Spread::of(vec![Duration::from_millis(7)]);
        assert_eq!(one.p99, Duration::from_millis(7));
    }
}
