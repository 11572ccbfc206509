//! The Prometheus text format, written by hand: families, samples, label
//! escaping, and the `team` label a catalogued consumer brings along.

use std::fmt::Write;

use idem_domain::{
    Catalogue,
    slo::{Scope, SloStatus},
};

/// The text being written, and the catalogue that gives each `consumer`
/// label its `team`.
pub(super) struct Exposition<'a> {
    pub(super) catalogue: &'a Catalogue,
    pub(super) text: String,
}

impl Exposition<'_> {
    pub(super) fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    /// A gauge family of capped counts, one sample per `label` value, and
    /// its `{name}_capped` twin: 1 where the count stopped at its cap.
    pub(super) fn capped_counts<'a>(
        &mut self,
        name: &str,
        help: &str,
        label: &str,
        counts: impl Iterator<Item = (&'a str, idem_domain::CappedCount)> + Clone,
    ) {
        self.family(name, "gauge", help);
        for (value, count) in counts.clone() {
            self.sample(name, &[(label, value)], count.value as f64);
        }
        let capped = format!("{name}_capped");
        let help = format!("1 when {name} stopped counting at its cap.");
        self.family(&capped, "gauge", &help);
        for (value, count) in counts {
            self.sample(
                &capped,
                &[(label, value)],
                f64::from(u8::from(count.capped)),
            );
        }
    }

    /// A gauge family with one sample per SLO (none where `value` has nothing to say).
    pub(super) fn per_slo(
        &mut self,
        slos: &[SloStatus],
        name: &str,
        help: &str,
        value: impl Fn(&SloStatus) -> Option<f64>,
    ) {
        self.family(name, "gauge", help);
        for s in slos {
            if let Some(v) = value(s) {
                self.sample(name, &slo_labels(s, &[]), v);
            }
        }
    }

    /// One sample. A `consumer` label the catalogue knows brings its
    /// `team` label along, so Alertmanager can route by team.
    pub(super) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        let team = labels
            .iter()
            .find(|(label, _)| *label == "consumer")
            .and_then(|(_, consumer)| self.catalogue.get(consumer))
            .map(|entry| ("team", entry.team.as_str()));
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, v)) in labels.iter().chain(team.iter()).enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{label}=\"{}\"", escape(v));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {}", number(value));
    }
}

/// A label value as the text format wants it: `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{value}")
    }
}

/// An SLO sample's labels: `slo`, then what its scope adds — `consumer`
/// (which brings its `team`) for a per-consumer SLO, `team` for a team's —
/// then `more`.
pub(super) fn slo_labels<'a>(
    s: &'a SloStatus,
    more: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut labels = vec![("slo", s.slo.name.as_str())];
    match &s.scope {
        Scope::Consumer { name, .. } => labels.push(("consumer", name.as_str())),
        scope => labels.extend(scope.team().map(|team| ("team", team))),
    }
    labels.extend_from_slice(more);
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_backslashes_quotes_and_newlines() {
        assert_eq!(escape(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape("line\nbreak"), "line\\nbreak");
        assert_eq!(
            escape("refund:EU/2026/Ø-1842 #1 %"),
            "refund:EU/2026/Ø-1842 #1 %"
        );
    }

    #[test]
    fn a_catalogued_consumer_s_sample_names_its_team() {
        let catalogue = crate::consumers_config::parse(
            "[[consumer]]\nname = \"payments\"\nteam = \"core\"\nprovider_contract = \"neither\"\n",
            "consumers.toml",
        )
        .unwrap();
        let mut out = Exposition {
            catalogue: &catalogue,
            text: String::new(),
        };
        out.sample("idem_x", &[("consumer", "payments"), ("reason", "r")], 1.0);
        out.sample("idem_x", &[("consumer", "reminders")], 2.0);
        out.sample("idem_y", &[], 3.0);
        assert_eq!(
            out.text,
            "idem_x{consumer=\"payments\",reason=\"r\",team=\"core\"} 1\n\
             idem_x{consumer=\"reminders\"} 2\nidem_y 3\n"
        );
    }
}
