//! `idem-tools reconcile`: how long reconciling a provider's export takes,
//! and the memory it holds, on a seeded database. The export is written
//! from the consumer's latest claims (each sent claim accepted with its
//! reference, most unknown ones accepted, failed ones failed, one sent
//! claim in a hundred left out, one record in a hundred for a call Idem
//! never made), then read as the server reads an upload: 64 KiB at a time
//! through `ExportReader`, 2,000 records at a time into the `Reconciler`.

use std::time::Instant;

use idem_domain::{ClaimStatus, ConsumerName, ExportReader, StatusWords};
use idem_store::{Actor, NewReconciliation, Reconciled, Store, Ts};

/// The export of `consumer`'s latest `records` claims, as CSV.
async fn export_of(store: &Store, consumer: &str, records: usize) -> Result<String, String> {
    let now = chrono::Utc::now() + chrono::TimeDelta::days(1);
    let claims = store
        .reconcile()
        .claims_delivered_between(
            consumer,
            Ts::from(now - chrono::TimeDelta::days(3650)),
            Ts::from(now),
            records as i64,
        )
        .await
        .map_err(|e| crate::cause_chain(&e))?;
    let mut csv = String::from("reference,key,status,time\n");
    for (n, claim) in claims.iter().rev().enumerate() {
        let at = claim.outcome_at.unwrap_or(claim.status_at).to_rfc3339();
        let reference = claim
            .provider_ref
            .clone()
            .unwrap_or_else(|| format!("ref_{n}"));
        let status = match claim.status {
            ClaimStatus::Sent if n % 100 == 7 => continue,
            ClaimStatus::Sent => "delivered",
            ClaimStatus::Unknown if n % 10 < 7 => "delivered",
            ClaimStatus::Failed => "failed",
            ClaimStatus::Unknown | ClaimStatus::Pending => continue,
        };
        let key = claim.key.as_str().replace('"', "\"\"");
        csv.push_str(&format!("{reference},\"{key}\",{status},{at}\n"));
        if n % 100 == 3 {
            csv.push_str(&format!("foreign_{n},\"not-ours-{n}\",delivered,{at}\n"));
        }
    }
    Ok(csv)
}

/// Kilobytes the process holds now, and at most so far (Linux).
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Feeds the records read so far to `reconciler` (bad lines too); the
/// time the lookups took.
async fn feed_read(
    read: &mut Vec<Result<idem_domain::ProviderRecord, idem_domain::BadLine>>,
    reconciler: &mut idem_store::Reconciler<'_>,
) -> Result<std::time::Duration, String> {
    let mut batch = Vec::new();
    for r in read.drain(..) {
        match r {
            Ok(record) => batch.push(record),
            Err(bad) => reconciler.bad_line(&bad),
        }
    }
    let fed = Instant::now();
    reconciler
        .feed(&batch)
        .await
        .map_err(|e| crate::cause_chain(&e))?;
    Ok(fed.elapsed())
}

/// Reads `export` into `reconciler` as the server reads an upload; the
/// time spent looking records up.
async fn read_into(
    export: &str,
    reconciler: &mut idem_store::Reconciler<'_>,
) -> Result<std::time::Duration, String> {
    let mut reader = ExportReader::new(StatusWords::default());
    let mut read = Vec::new();
    let mut feed_time = std::time::Duration::ZERO;
    for chunk in export.as_bytes().chunks(64 * 1024) {
        reader.push(chunk, &mut read);
        if read.len() >= 2_000 {
            feed_time += feed_read(&mut read, reconciler).await?;
        }
    }
    reader.finish(&mut read);
    Ok(feed_time + feed_read(&mut read, reconciler).await?)
}

/// Reconciles an export of `records` records of `consumer` and prints the
/// time and the memory it took.
pub async fn run(store: &Store, consumer: &str, records: usize) -> Result<(), String> {
    let export = export_of(store, consumer, records).await?;
    let lines = export.lines().count() - 1;
    let name = ConsumerName::parse(consumer).map_err(|e| e.to_string())?;
    let (rss_before, _) = memory();
    let started = Instant::now();
    let mut reconciler = store.reconcile().reconciler(name, 300);
    let feed_time = read_into(&export, &mut reconciler).await?;
    let read_all = started.elapsed();
    let action_id = format!("bench-reconcile-{}", chrono::Utc::now().timestamp_micros());
    let kept = reconciler
        .finish(&NewReconciliation {
            action_id: &action_id,
            actor: Actor {
                name: "idem-tools",
                role: "admin",
                client_addr: None,
            },
            file_name: "bench.csv",
            file_sha256: &"0".repeat(64),
            file_bytes: export.len() as i64,
            status_words: "",
        })
        .await
        .map_err(|e| crate::cause_chain(&e))?;
    let total = started.elapsed();
    let (rss_after, peak) = memory();
    let Reconciled::Kept { id } = kept else {
        return Err(format!("not kept: {kept:?}"));
    };
    let found = store
        .reconcile()
        .reconciliation(id, 0, &idem_domain::Within::Every)
        .await
        .map_err(|e| crate::cause_chain(&e))?;
    let counts: Vec<String> = found
        .iter()
        .flat_map(|r| r.classes.iter())
        .filter(|c| c.count > 0)
        .map(|c| format!("{} {}", c.count, c.class))
        .collect();
    println!(
        "reconciliation #{id} of {consumer}: {lines} records ({} KiB)",
        export.len() / 1024
    );
    println!(
        "  read and matched: {:.2} s (lookups {:.2} s)",
        read_all.as_secs_f64(),
        feed_time.as_secs_f64()
    );
    println!(
        "  missing claims and kept: {:.2} s",
        (total - read_all).as_secs_f64()
    );
    println!("  total: {:.2} s", total.as_secs_f64());
    println!(
        "  memory: {} MiB resident before, {} MiB after, {} MiB at most",
        rss_before / 1024,
        rss_after / 1024,
        peak / 1024
    );
    println!(
        "  found: {}",
        if counts.is_empty() {
            "nothing".to_owned()
        } else {
            counts.join(", ")
        }
    );
    Ok(())
}
