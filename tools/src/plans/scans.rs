//! What a plan's text says about how it read its tables.

/// For each sequential scan in `plan`: whether it sits under a `Limit`, and
/// how many rows it read (returned plus removed by its filter).
pub(super) fn sequential_scans(plan: &str) -> Vec<(bool, u64)> {
    let lines: Vec<&str> = plan.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !line.contains("Seq Scan on") {
            continue;
        }
        let under_limit = lines[..i].iter().any(|l| {
            l.trim_start()
                .trim_start_matches("->")
                .trim_start()
                .starts_with("Limit")
        });
        let number_after = |text: &str, label: &str| -> u64 {
            text.split(label).nth(1).map_or(0, |rest| {
                rest.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse()
                    .unwrap_or(0)
            })
        };
        let returned = number_after(line.rsplit("actual").next().unwrap_or(""), "rows=");
        let removed = lines[i + 1..]
            .iter()
            .take_while(|l| !l.contains("->"))
            .find(|l| l.contains("Rows Removed by Filter:"))
            .map_or(0, |l| number_after(l, "Rows Removed by Filter: "));
        found.push((under_limit, returned + removed));
    }
    found
}

/// The scan nodes of a plan (`Index Scan using claims_unknown_since on claims`).
pub(super) fn scans(plan: &str) -> Vec<String> {
    plan.lines()
        .filter(|l| l.contains("Scan") && !l.contains("Query Text"))
        .map(|l| {
            let l = l.trim().trim_start_matches("->").trim();
            l.split("  (").next().unwrap_or(l).to_owned()
        })
        .collect()
}
