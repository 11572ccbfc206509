//! The fields of one record of an export: where a CSV header puts them,
//! how a CSV record or a JSON line gives them, and how they are checked
//! into a [`ProviderRecord`].

use chrono::{DateTime, NaiveDateTime, Utc};

use super::{ProviderRecord, StatusWords};
use crate::{
    IdempotencyKey, action,
    bulk::{UNCLOSED_QUOTE, records},
};

/// The words each column may be headed with (lowercase, `_` for spaces
/// and dashes), as providers name them.
const REFERENCE: &[&str] = &[
    "reference",
    "provider_ref",
    "provider_reference",
    "ref",
    "message_id",
    "transaction_id",
    "charge_id",
    "id",
];
const KEY: &[&str] = &["key", "idempotency_key", "our_key", "custom_id"];
const STATUS: &[&str] = &["status", "state", "event", "outcome", "result"];
const TIME: &[&str] = &[
    "time",
    "timestamp",
    "at",
    "created_at",
    "created",
    "date",
    "sent_at",
    "event_time",
];

/// Where each field is in a CSV export's lines.
#[derive(Debug, Clone, Copy)]
pub(super) struct Columns {
    reference: Option<usize>,
    key: Option<usize>,
    status: usize,
    time: usize,
    width: usize,
}

/// A record's fields as text, before they are checked.
pub(super) struct Fields {
    reference: Option<String>,
    key: Option<String>,
    status: String,
    time: String,
}

pub(super) fn header(text: &str) -> Result<Columns, String> {
    let Some((_, Ok(names))) = records(text).into_iter().next() else {
        return Err("the header is not a CSV line".into());
    };
    let names: Vec<String> = names
        .iter()
        .map(|n| n.trim().to_lowercase().replace([' ', '-'], "_"))
        .collect();
    let find = |aliases: &[&str]| names.iter().position(|n| aliases.contains(&n.as_str()));
    let needed = |aliases: &[&str], what: &str| {
        find(aliases).ok_or_else(|| {
            format!(
                "the header has no {what} column (name it one of: {})",
                aliases.join(", ")
            )
        })
    };
    let columns = Columns {
        reference: find(REFERENCE),
        key: find(KEY),
        status: needed(STATUS, "status")?,
        time: needed(TIME, "time")?,
        width: names.len(),
    };
    if columns.reference.is_none() && columns.key.is_none() {
        return Err(format!(
            "the header has neither a reference column ({}) nor a key column ({})",
            REFERENCE.join(", "),
            KEY.join(", ")
        ));
    }
    Ok(columns)
}

/// Why a CSV record was not read: it is not over yet (a quoted field runs
/// on past the text), or it is bad.
#[derive(Debug)]
pub(super) enum CsvError {
    Unclosed,
    Bad(String),
}

pub(super) fn csv_record(columns: &Columns, text: &str) -> Result<Fields, CsvError> {
    let Some((_, fields)) = records(text).into_iter().next() else {
        return Err(CsvError::Bad("not a CSV line".into()));
    };
    let fields = fields.map_err(|e| {
        if e == UNCLOSED_QUOTE {
            CsvError::Unclosed
        } else {
            CsvError::Bad(e)
        }
    })?;
    if fields.len() != columns.width {
        return Err(CsvError::Bad(format!(
            "expected {} fields, as the header names, found {}",
            columns.width,
            fields.len()
        )));
    }
    let at = |i: usize| fields[i].clone();
    Ok(Fields {
        reference: columns.reference.map(at),
        key: columns.key.map(at),
        status: at(columns.status),
        time: at(columns.time),
    })
}

pub(super) fn json_record(text: &str) -> Result<Fields, String> {
    let object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(text).map_err(|e| format!("not a JSON object: {e}"))?;
    let find = |aliases: &[&str]| {
        aliases.iter().find_map(|a| match object.get(*a) {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            _ => None,
        })
    };
    Ok(Fields {
        reference: find(REFERENCE),
        key: find(KEY),
        status: find(STATUS).ok_or("no status field")?,
        time: find(TIME).ok_or("no time field")?,
    })
}

pub(super) fn record(
    words: &StatusWords,
    line: usize,
    fields: Fields,
) -> Result<ProviderRecord, String> {
    let reference = match fields.reference.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(r) => Some(
            action::ProviderRef::parse(r)
                .map_err(|e| e.to_string())?
                .map(String::from)
                .ok_or("the reference is blank")?,
        ),
    };
    // A key is taken exactly as written: it may hold spaces.
    let key = match fields.key.as_deref() {
        None | Some("") => None,
        Some(k) => Some(IdempotencyKey::parse(k).map_err(|e| format!("the key: {e}"))?),
    };
    if reference.is_none() && key.is_none() {
        return Err("neither a reference nor a key".into());
    }
    let status = words.status(&fields.status).ok_or_else(|| {
        format!(
            "the status “{}” means neither accepted nor failed here; name it on the form \
             ({}=accepted or {}=failed)",
            fields.status.trim(),
            fields.status.trim(),
            fields.status.trim()
        )
    })?;
    Ok(ProviderRecord {
        line,
        reference,
        key,
        status,
        at: time(&fields.time)?,
    })
}

/// RFC 3339, `YYYY-MM-DD HH:MM:SS` in UTC, or Unix seconds (milliseconds
/// past 10^11), from 2000 to 2099: a time outside is a mistake (a
/// zero, a field in another unit), and would stretch the export's span.
fn time(text: &str) -> Result<DateTime<Utc>, String> {
    let at = any_time(text)?;
    if (2000..2100).contains(&chrono::Datelike::year(&at)) {
        Ok(at)
    } else {
        Err(format!(
            "the time “{}” is not between 2000 and 2099",
            text.trim()
        ))
    }
}

fn any_time(text: &str) -> Result<DateTime<Utc>, String> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(t.and_utc());
        }
    }
    let unix = text.parse::<i64>().ok().and_then(|n| match n {
        n if n > 100_000_000_000 => DateTime::from_timestamp_millis(n),
        n => DateTime::from_timestamp(n, 0),
    });
    unix.ok_or_else(|| {
        format!("the time “{text}” is not RFC 3339, YYYY-MM-DD HH:MM:SS (UTC) or Unix seconds")
    })
}
