use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn slo(objective: f64, window: Span, min_events: u64) -> Slo {
    Slo {
        name: "test".into(),
        description: String::new(),
        sli: Indicator::Counters {
            valid: Metric::Deliveries,
            bad: Metric::DeadLetters,
        },
        objective: Objective::try_from(objective).unwrap(),
        window,
        min_events,
        team: None,
        consumers: Vec::new(),
        per_consumer: false,
        objectives: Default::default(),
    }
}

#[test]
fn the_sli_weighs_every_event_not_every_minute() {
    // Minute one: 1 of 1 good. Minute two: 900 of 1000 good.
    // An average of ratios would say 95%; the SLI is 901 / 1001.
    let a = Events::new(1.0, 1.0);
    let b = Events::new(900.0, 1000.0);
    let total = Events::new(a.good + b.good, a.valid + b.valid);
    assert!(close(total.ratio().unwrap(), 901.0 / 1001.0));
}

#[test]
fn no_valid_events_is_no_data_not_a_perfect_score() {
    assert_eq!(Events::new(0.0, 0.0).ratio(), None);
    assert_eq!(Events::new(0.0, 0.0).burn_rate(Objective(0.999)), None);
}

#[test]
fn budget_and_burn_rate_match_hand_computed_values() {
    let objective = Objective(0.999);
    assert!(close(objective.error_budget(), 0.001));
    // 10,000 events, 5 bad: error ratio 0.0005, half the budget.
    let events = Events::new(9_995.0, 10_000.0);
    assert!(close(events.error_ratio().unwrap(), 0.0005));
    assert!(close(events.burn_rate(objective).unwrap(), 0.5));
    assert!(close(events.budget_remaining(objective).unwrap(), 0.5));
    // 30 bad: three budgets' worth, two budgets overspent.
    let events = Events::new(9_970.0, 10_000.0);
    assert!(close(events.burn_rate(objective).unwrap(), 3.0));
    assert!(close(events.budget_remaining(objective).unwrap(), -2.0));
}

#[test]
fn a_ratio_slo_on_duplicates_burns_on_the_duplicate_share() {
    // Duplicate-claim rate ≤ 1%: objective 0.99. 2% duplicates burn 2×.
    let events = Events::new(98.0, 100.0);
    assert!(close(events.burn_rate(Objective(0.99)).unwrap(), 2.0));
}

#[test]
fn tier_thresholds_for_a_thirty_day_window_are_the_workbooks() {
    let thresholds: Vec<f64> = TIERS.iter().map(|t| t.threshold(Span::days(30))).collect();
    for (got, want) in thresholds.iter().zip([14.4, 6.0, 3.0, 1.0]) {
        assert!(close(*got, want), "{got} != {want}");
    }
}

#[test]
fn tier_thresholds_scale_for_a_twenty_eight_day_window() {
    let thresholds: Vec<f64> = TIERS.iter().map(|t| t.threshold(Span::days(28))).collect();
    for (got, want) in thresholds.iter().zip([13.44, 5.6, 2.8, 0.1 * 28.0 / 3.0]) {
        assert!(close(*got, want), "{got} != {want}");
    }
}

#[test]
fn a_tier_fires_only_when_both_spans_burn_faster_than_its_threshold() {
    let slo = slo(0.999, Span::days(30), 0);
    let page = TIERS[0];
    // 2% errors = 20× burn, over both spans.
    let hot = Events::new(980.0, 1000.0);
    // 1% errors = 10× burn: under 14.4.
    let warm = Events::new(990.0, 1000.0);
    assert!(TierReading::new(&slo, page, hot, hot).firing);
    assert!(
        !TierReading::new(&slo, page, hot, warm).firing,
        "the short span has recovered"
    );
    assert!(
        !TierReading::new(&slo, page, warm, hot).firing,
        "a blip, not a trend"
    );
    // Just under the threshold (14.3×) does not fire.
    let under = Events::new(1000.0 - 14.3, 1000.0);
    assert!(!TierReading::new(&slo, page, under, under).firing);
}

#[test]
fn a_low_traffic_window_below_the_minimum_count_does_not_alert() {
    let slo = slo(0.999, Span::days(28), 100);
    // 3 of 10 bad: 300× burn, but only 10 events.
    let few = Events::new(7.0, 10.0);
    let status = SloStatus::evaluate(&slo, |_| few);
    assert!(status.tiers.iter().all(|t| t.too_few_events && !t.firing));
    assert_eq!(status.alert, AlertState::TooFewEvents);
    // The same error ratio with enough traffic pages.
    let many = Events::new(700.0, 1000.0);
    assert_eq!(SloStatus::evaluate(&slo, |_| many).alert, AlertState::Page);
}

#[test]
fn a_ticket_tier_alone_opens_a_ticket_and_spent_budget_is_named() {
    let slo = slo(0.999, Span::days(30), 0);
    // Burn 4×: over the 3× and 1× ticket tiers, under both page tiers.
    let status = SloStatus::evaluate(&slo, |_| Events::new(996.0, 1000.0));
    assert_eq!(status.alert, AlertState::Ticket);
    let firing: Vec<Severity> = status
        .tiers
        .iter()
        .filter(|t| t.firing)
        .map(|t| t.tier.severity)
        .collect();
    assert_eq!(firing, vec![Severity::Ticket, Severity::Ticket]);
    // Window overspent but the recent spans are clean: budget spent, no alert.
    let status = SloStatus::evaluate(&slo, |span| {
        if span == slo.window {
            Events::new(990.0, 1000.0)
        } else {
            Events::new(1000.0, 1000.0)
        }
    });
    assert_eq!(status.alert, AlertState::BudgetSpent);
    assert!(close(status.budget_remaining.unwrap(), -9.0));
}

#[test]
fn worst_first_puts_pages_first_then_the_least_budget() {
    let slo = slo(0.999, Span::days(30), 0);
    let ok_half = SloStatus::evaluate(&slo, |_| Events::new(9_995.0, 10_000.0));
    let ok_full = SloStatus::evaluate(&slo, |_| Events::new(10_000.0, 10_000.0));
    let page = SloStatus::evaluate(&slo, |_| Events::new(900.0, 1000.0));
    let none = SloStatus::evaluate(&slo, |_| Events::default());
    let mut all = vec![none, ok_full, page, ok_half];
    worst_first(&mut all);
    let order: Vec<(AlertState, Option<f64>)> =
        all.iter().map(|s| (s.alert, s.budget_remaining)).collect();
    assert_eq!(order[0].0, AlertState::Page);
    assert_eq!(order[1].0, AlertState::Ok);
    assert!(close(order[1].1.unwrap(), 0.5));
    assert_eq!(order[2].0, AlertState::Ok);
    assert_eq!(order[3].0, AlertState::NoData);
}

#[test]
fn spans_read_and_print_as_people_write_them() {
    for text in ["90s", "30m", "6h", "28d"] {
        assert_eq!(text.parse::<Span>().unwrap().to_string(), text);
    }
    assert_eq!("60m".parse::<Span>().unwrap().to_string(), "1h");
    for bad in [
        "",
        "28",
        "d",
        "-1d",
        "0s",
        "1w",
        "91d",
        "99999999999999999d",
    ] {
        assert!(bad.parse::<Span>().is_err(), "{bad:?} parsed");
    }
}

#[test]
fn the_defaults_are_valid_and_each_says_why() {
    let slos = default_slos();
    assert_eq!(slos.len(), 8);
    for slo in &slos {
        slo.check().unwrap_or_else(|e| panic!("{}: {e}", slo.name));
        assert!(slo.description.len() > 40, "{} explains itself", slo.name);
        assert_eq!(slo.window, Span::days(28));
    }
}

#[test]
fn thresholds_must_be_answerable_from_rollups() {
    let bad = Indicator::Histogram {
        histogram: Metric::OutcomeLatencySeconds,
        at_most_seconds: 800.0,
    };
    assert!(bad.check().unwrap_err().contains("900"));
    let wrong_kind = Indicator::GaugeSlices {
        gauge: Metric::Deliveries,
        at_most_seconds: 60.0,
    };
    assert!(wrong_kind.check().unwrap_err().contains("not a gauge"));
}

#[test]
fn the_defaults_keep_their_names_and_order() {
    let names: Vec<String> = default_slos().into_iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "unknown-resolved-15m",
            "not-dead-lettered",
            "transactions-committed",
            "duplicate-claim-rate",
            "queue-age-60s",
            "outbox-age-30s",
            "reconciled-15m",
            "recovery-60m",
        ]
    );
}

mod scopes {
    use super::*;
    use crate::{Catalogue, ConsumerName, catalogue::tests::entry};

    fn catalogue() -> Catalogue {
        Catalogue::new(
            vec![
                entry("payment-webhooks", "payments"),
                entry("ledger-sync", "payments"),
                entry("reminders", "growth"),
            ],
            "consumers.toml",
        )
    }

    fn set(slos: Vec<Slo>) -> SloSet {
        SloSet {
            slos,
            source: "slo.toml".into(),
        }
    }

    #[test]
    fn a_per_consumer_slo_is_one_instance_per_consumer_with_its_own_objective() {
        let mut payments = slo(0.999, Span::days(28), 0);
        payments.team = Some("payments".into());
        payments.per_consumer = true;
        payments.objectives.insert(
            ConsumerName::parse("payment-webhooks").unwrap(),
            Objective(0.9999),
        );
        let fleet = slo(0.99, Span::days(28), 0);
        let got = instances(&set(vec![payments, fleet]), &catalogue(), &[]);
        let shown: Vec<(String, f64, Option<Vec<String>>)> = got
            .iter()
            .map(|i| (i.scope.label(), i.slo.objective.get(), i.consumers.clone()))
            .collect();
        assert_eq!(
            shown,
            [
                (
                    "ledger-sync".into(),
                    0.999,
                    Some(vec!["ledger-sync".into()])
                ),
                (
                    "payment-webhooks".into(),
                    0.9999,
                    Some(vec!["payment-webhooks".into()])
                ),
                ("every consumer".into(), 0.99, None),
            ]
        );
        assert_eq!(got[0].scope.team(), Some("payments"));
        assert_eq!(got[2].scope.team(), None);
    }

    #[test]
    fn a_per_consumer_instance_names_no_other_consumer_nor_its_objective() {
        let mut named = slo(0.999, Span::days(28), 0);
        named.per_consumer = true;
        named.consumers = ["payment-webhooks", "reminders"]
            .map(|n| ConsumerName::parse(n).unwrap())
            .to_vec();
        named
            .objectives
            .insert(ConsumerName::parse("reminders").unwrap(), Objective(0.95));
        let got = instances(&set(vec![named]), &catalogue(), &[]);
        let mine = got
            .iter()
            .find(|i| i.scope.consumer() == Some("payment-webhooks"))
            .unwrap();
        let shown = format!("{:?}", mine.slo);
        assert!(!shown.contains("reminders"), "{shown}");
        assert_eq!(mine.slo.objective.get(), 0.999);
        let theirs = got
            .iter()
            .find(|i| i.scope.consumer() == Some("reminders"))
            .unwrap();
        assert_eq!(theirs.slo.objective.get(), 0.95);
    }

    #[test]
    fn every_consumer_means_the_catalogues_and_those_seen_in_the_tables() {
        let mut each = slo(0.999, Span::days(28), 0);
        each.per_consumer = true;
        let got = instances(
            &set(vec![each]),
            &catalogue(),
            &["orders".into(), "reminders".into()],
        );
        let names: Vec<_> = got.iter().filter_map(|i| i.scope.consumer()).collect();
        assert_eq!(
            names,
            ["ledger-sync", "orders", "payment-webhooks", "reminders"]
        );
        assert_eq!(got[1].scope.team(), None, "orders is not in the catalogue");
    }

    #[test]
    fn named_consumers_together_belong_to_their_team_only_when_they_share_one() {
        let mut together = slo(0.999, Span::days(28), 0);
        together.consumers = vec![
            ConsumerName::parse("payment-webhooks").unwrap(),
            ConsumerName::parse("ledger-sync").unwrap(),
        ];
        let got = instances(&set(vec![together.clone()]), &catalogue(), &[]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].scope.team(), Some("payments"));
        together
            .consumers
            .push(ConsumerName::parse("reminders").unwrap());
        let got = instances(&set(vec![together]), &catalogue(), &[]);
        assert_eq!(got[0].scope.team(), None);
    }

    #[test]
    fn one_instance_is_found_for_its_page_and_no_other() {
        let mut payments = slo(0.999, Span::days(28), 0);
        payments.team = Some("payments".into());
        payments.per_consumer = true;
        let catalogue = catalogue();
        assert!(payments.instance(&catalogue, Some("ledger-sync")).is_some());
        assert!(
            payments.instance(&catalogue, Some("reminders")).is_none(),
            "another team's"
        );
        assert!(
            payments.instance(&catalogue, None).is_none(),
            "per consumer: one must be named"
        );
        let fleet = slo(0.99, Span::days(28), 0);
        assert!(fleet.instance(&catalogue, Some("ledger-sync")).is_none());
        assert_eq!(
            fleet.instance(&catalogue, None).unwrap().scope,
            Scope::Fleet
        );
    }
}
