//! What a bulk resolve takes: the keys to settle, each with the claim
//! version its starter saw and, to resolve as sent, the provider's
//! reference — read from a page's rows, an API body, or a pasted list
//! (`consumer,key,reference` lines, CSV-quoted where a field holds a comma,
//! a quote or a line break).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::{ConsumerName, IdempotencyKey, REDRIVE_MAX, ResolveAs, action};

/// One key of a bulk resolve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkKey {
    pub consumer: ConsumerName,
    pub key: IdempotencyKey,
    /// The claim version the starter saw; `None`: the version the claim has
    /// when the run starts (a pasted list names no versions).
    pub version: Option<i64>,
    /// To resolve as sent: the provider's reference for this key.
    pub provider_ref: Option<String>,
}

/// A line of a list that cannot be taken, and why (1-based).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BadLine {
    pub line: usize,
    pub reason: String,
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            // The list as a whole (it is empty).
            0 => f.write_str(&self.reason),
            line => write!(f, "line {line}: {}", self.reason),
        }
    }
}

/// The keys of a bulk resolve as `resolve_as` needs them, or every line
/// that is not (numbered from 1 in the order given): at most
/// [`REDRIVE_MAX`] keys, none twice, a reference on each key to resolve as
/// sent and on none to resolve as failed.
pub fn check_keys(resolve_as: ResolveAs, keys: &[BulkKey]) -> Result<(), Vec<BadLine>> {
    check_lines(resolve_as, keys, |i| i + 1)
}

/// [`check_keys`], with `line_of` giving the line the `i`th key is on.
fn check_lines(
    resolve_as: ResolveAs,
    keys: &[BulkKey],
    line_of: impl Fn(usize) -> usize,
) -> Result<(), Vec<BadLine>> {
    let mut bad = Vec::new();
    if keys.is_empty() {
        bad.push(BadLine {
            line: 0,
            reason: "no key is listed".into(),
        });
    }
    if keys.len() > REDRIVE_MAX as usize {
        bad.push(BadLine {
            line: line_of(REDRIVE_MAX as usize),
            reason: format!(
                "one bulk resolve takes at most {REDRIVE_MAX} keys; {} are listed",
                keys.len()
            ),
        });
    }
    let mut seen: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, k) in keys.iter().enumerate() {
        let line = line_of(i);
        let mut refuse = |reason: String| bad.push(BadLine { line, reason });
        if let Some(first) = seen.insert((k.consumer.as_str(), k.key.as_str()), line) {
            refuse(format!("the key is listed twice (first on line {first})"));
        }
        match (
            resolve_as,
            k.provider_ref.as_deref().map(action::ProviderRef::parse),
        ) {
            (ResolveAs::Sent, None | Some(Ok(None))) => {
                refuse("resolving as sent needs the provider's reference for each key".into())
            }
            (ResolveAs::Sent, Some(Err(err))) => refuse(err.to_string()),
            (ResolveAs::Sent, Some(Ok(Some(_)))) => {}
            (_, Some(Ok(Some(_)) | Err(_))) => {
                refuse("a key resolved as failed carries no provider reference".into())
            }
            (_, None | Some(Ok(None))) => {}
        }
    }
    if bad.is_empty() { Ok(()) } else { Err(bad) }
}

/// The keys of a pasted list of `consumer,key,reference` lines (blank
/// lines and a `consumer,key,reference` header skipped), or every line
/// that is not one, numbered as the person sees them.
pub fn parse_references(text: &str) -> Result<Vec<BulkKey>, Vec<BadLine>> {
    let mut keys = Vec::new();
    let mut lines = Vec::new();
    let mut bad = Vec::new();
    for (line, fields) in records(text) {
        let fields = match fields {
            Ok(fields) => fields,
            Err(reason) => {
                bad.push(BadLine { line, reason });
                continue;
            }
        };
        if fields.iter().all(|f| f.trim().is_empty()) {
            continue;
        }
        let header = fields
            .iter()
            .map(|f| f.trim().to_lowercase())
            .collect::<Vec<_>>();
        if keys.is_empty() && bad.is_empty() && header == ["consumer", "key", "reference"] {
            continue;
        }
        match reference_line(fields) {
            Ok(key) => {
                keys.push(key);
                lines.push(line);
            }
            Err(reason) => bad.push(BadLine { line, reason }),
        }
    }
    let checked = match keys.is_empty() && !bad.is_empty() {
        true => Ok(()),
        // Numbered as the person reads the list: by its own lines.
        false => check_lines(ResolveAs::Sent, &keys, |i| {
            lines.get(i).copied().unwrap_or(0)
        }),
    };
    if let Err(more) = checked {
        bad.extend(more);
    }
    bad.sort_by_key(|b| b.line);
    if bad.is_empty() { Ok(keys) } else { Err(bad) }
}

fn reference_line(fields: Vec<String>) -> Result<BulkKey, String> {
    let [consumer, key, reference]: [String; 3] = fields.try_into().map_err(|f: Vec<String>| {
        format!(
            "expected 3 fields (consumer,key,reference), found {}",
            f.len()
        )
    })?;
    Ok(BulkKey {
        consumer: ConsumerName::parse(consumer.trim()).map_err(|e| e.to_string())?,
        key: IdempotencyKey::parse(key).map_err(|e| e.to_string())?,
        version: None,
        provider_ref: Some(reference.trim().to_owned()),
    })
}

/// Why [`records`] ends a record at the end of the text: a quoted field
/// is still open.
pub(crate) const UNCLOSED_QUOTE: &str = "a quoted field is not closed";

/// The CSV records of `text` (RFC 4180: `"` quotes a field, `""` is a
/// quote inside one, a quoted field may span lines), each with the line it
/// starts on.
pub(crate) fn records(text: &str) -> Vec<(usize, Result<Vec<String>, String>)> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while chars.peek().is_some() {
        let start = line;
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        let mut error = None;
        loop {
            match chars.next() {
                None => break,
                Some('"') if quoted => match chars.peek() {
                    Some('"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some(',' | '\n' | '\r') | None => quoted = false,
                    Some(_) => {
                        quoted = false;
                        error = Some("text after a closing quote (quote the whole field)".to_owned());
                    }
                },
                Some('"') if field.is_empty() => quoted = true,
                Some('"') => error = Some("a quote inside an unquoted field (quote the whole field, and double the quote)".to_owned()),
                Some('\n') if quoted => {
                    line += 1;
                    field.push('\n');
                }
                Some(c) if quoted => field.push(c),
                Some(',') => fields.push(std::mem::take(&mut field)),
                Some('\r') if chars.peek() == Some(&'\n') => {}
                Some('\n') => {
                    line += 1;
                    break;
                }
                Some(c) => field.push(c),
            }
        }
        if quoted {
            error = Some(UNCLOSED_QUOTE.to_owned());
        }
        fields.push(field);
        out.push((start, error.map_or(Ok(fields), Err)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(consumer: &str, key: &str, reference: Option<&str>) -> BulkKey {
        BulkKey {
            consumer: ConsumerName::parse(consumer).unwrap(),
            key: IdempotencyKey::parse(key).unwrap(),
            version: None,
            provider_ref: reference.map(str::to_owned),
        }
    }

    #[test]
    fn a_pasted_list_reads_awkward_keys_and_skips_the_header_and_blank_lines() {
        let text = "consumer,key,reference\r\n\
                    payments,\"pay:1,2\",ch_1\r\n\
                    \n\
                    payments,\"say \"\"hi\"\" 👋\", ch_2 \n\
                    reminders,مرحبا/%# x,re_4";
        assert_eq!(
            parse_references(text),
            Ok(vec![
                key("payments", "pay:1,2", Some("ch_1")),
                key("payments", "say \"hi\" 👋", Some("ch_2")),
                key("reminders", "مرحبا/%# x", Some("re_4")),
            ])
        );
    }

    #[test]
    fn every_bad_line_of_a_pasted_list_is_named_with_its_number() {
        let text = "payments,a,ch_1\n\
                    payments,b\n\
                    payments,\"two\nlines\",ch_3\n\
                    payments,c,\n\
                    payments,a,ch_9\n\
                    pay\"ments,d,ch_4\n\
                    payments,e,\"ch_5";
        let bad = parse_references(text).unwrap_err();
        let lines: Vec<usize> = bad.iter().map(|b| b.line).collect();
        assert_eq!(lines, [2, 3, 5, 6, 7, 8], "{bad:#?}");
        assert!(bad[0].reason.contains("expected 3 fields"), "{}", bad[0]);
        assert!(bad[1].reason.contains("control"), "{}", bad[1]);
        assert!(bad[2].reason.contains("reference"), "{}", bad[2]);
        assert!(bad[3].reason.contains("first on line 1"), "{}", bad[3]);
        assert!(bad[4].reason.contains("quote"), "{}", bad[4]);
        assert!(bad[5].reason.contains("not closed"), "{}", bad[5]);
    }

    #[test]
    fn a_key_listed_twice_names_both_lines_as_the_person_reads_them() {
        let text = "consumer,key,reference\n\norders,a,x\norders,\"b\" ,y\norders,a,z\n";
        let bad = parse_references(text).unwrap_err();
        let shown: Vec<String> = bad.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "line 4: text after a closing quote (quote the whole field)",
                "line 5: the key is listed twice (first on line 3)",
            ]
        );
    }

    #[test]
    fn keys_to_resolve_as_failed_carry_no_reference_and_no_more_than_the_bound() {
        let failed = [key("payments", "a", None), key("payments", "b", None)];
        assert_eq!(check_keys(ResolveAs::Failed, &failed), Ok(()));
        assert!(check_keys(ResolveAs::Sent, &failed).is_err());
        let with_ref = [key("payments", "a", Some("ch_1"))];
        assert!(check_keys(ResolveAs::FailedRetry, &with_ref).is_err());
        assert!(check_keys(ResolveAs::Failed, &[]).is_err());
        let many: Vec<BulkKey> = (0..=REDRIVE_MAX)
            .map(|i| key("payments", &format!("k{i}"), None))
            .collect();
        let bad = check_keys(ResolveAs::Failed, &many).unwrap_err();
        assert!(bad[0].reason.contains("at most 500"), "{}", bad[0]);
    }
}
