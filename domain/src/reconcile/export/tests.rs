use super::*;

fn read_in_chunks(
    text: &str,
    words: &str,
    chunk: usize,
) -> (Vec<ProviderRecord>, Vec<BadLine>, Option<String>) {
    let mut reader = ExportReader::new(StatusWords::parse(words).unwrap());
    let mut out = Vec::new();
    for piece in text.as_bytes().chunks(chunk) {
        reader.push(piece, &mut out);
    }
    reader.finish(&mut out);
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for r in out {
        match r {
            Ok(r) => good.push(r),
            Err(b) => bad.push(b),
        }
    }
    (good, bad, reader.refused().map(str::to_owned))
}

#[test]
fn a_csv_export_reads_the_same_whatever_the_chunks_it_arrives_in() {
    let text = "Message-ID,Idempotency Key,Event,Timestamp\r\n\
                msg_1,\"pay:1,2\",delivered,2026-12-05T01:00:00Z\r\n\
                msg_2,\"say \"\"hi\"\" 👋\",bounced,2026-12-05 01:00:01\r\n\
                ,refund:EU/2026/Ø-1842 مرحبا,queued,1796432402\n\
                msg_4,,Accepted,1796432403000";
    for chunk in [1, 3, 7, 64, 4096] {
        let (good, bad, refused) = read_in_chunks(text, "queued=accepted", chunk);
        assert_eq!(refused, None);
        assert_eq!(bad, Vec::new(), "chunk {chunk}");
        assert_eq!(good.len(), 4);
        assert_eq!(good[0].reference.as_deref(), Some("msg_1"));
        assert_eq!(good[0].key.as_ref().unwrap().as_str(), "pay:1,2");
        assert_eq!(good[0].status, ProviderStatus::Accepted);
        assert_eq!(good[1].status, ProviderStatus::Failed);
        assert_eq!(good[1].line, 3);
        assert_eq!(good[2].reference, None);
        assert_eq!(
            good[2].key.as_ref().unwrap().as_str(),
            "refund:EU/2026/Ø-1842 مرحبا"
        );
        assert_eq!(
            good[2].status,
            ProviderStatus::Accepted,
            "the form's own word"
        );
        assert_eq!(good[2].at.to_rfc3339(), "2026-12-05T01:00:02+00:00");
        assert_eq!(good[3].at.to_rfc3339(), "2026-12-05T01:00:03+00:00");
        assert_eq!(good[3].key, None);
    }
}

#[test]
fn json_lines_read_with_the_same_column_names() {
    let text = "{\"id\":\"re_1\",\"idempotency_key\":\"k 1\",\"status\":\"succeeded\",\"created\":1796432400}\n\
                \n\
                {\"id\":\"re_2\",\"status\":\"failed\"}\n\
                [1,2]\n";
    let (good, bad, refused) = read_in_chunks(text, "", 5);
    assert_eq!(refused, None);
    assert_eq!(good.len(), 1);
    assert_eq!(good[0].key.as_ref().unwrap().as_str(), "k 1");
    assert_eq!(bad.iter().map(|b| b.line).collect::<Vec<_>>(), [3, 4]);
    assert!(bad[0].reason.contains("no time field"), "{bad:?}");
    assert!(bad[1].reason.contains("not a JSON object"), "{bad:?}");
}

#[test]
fn every_bad_line_is_numbered_and_says_why_and_the_rest_are_read() {
    let long = "x".repeat(EXPORT_MAX_LINE_BYTES + 10);
    let text = format!(
        "reference,key,status,time\n\
         r1,k1,delivered,2026-12-05T01:00:00Z\n\
         r2,k2,delivered\n\
         r3,k3,maybe,2026-12-05T01:00:00Z\n\
         r4,k4,delivered,yesterday\n\
         ,,delivered,2026-12-05T01:00:00Z\n\
         r6,\"k6,delivered,2026-12-05T01:00:00Z\n\
         r7,k\u{0}7,delivered,2026-12-05T01:00:00Z\n\
         {long}\n\
         r9,k9,failed,2026-12-05T01:00:00Z\n"
    );
    let (good, bad, refused) = read_in_chunks(&text, "", 100);
    assert_eq!(refused, None);
    assert_eq!(good.iter().map(|r| r.line).collect::<Vec<_>>(), [2, 10]);
    let lines: Vec<(usize, &str)> = bad.iter().map(|b| (b.line, b.reason.as_str())).collect();
    assert_eq!(lines.len(), 7, "{lines:?}");
    assert!(lines[0].0 == 3 && lines[0].1.contains("expected 4 fields"));
    assert!(lines[1].0 == 4 && lines[1].1.contains("“maybe”"));
    assert!(lines[2].0 == 5 && lines[2].1.contains("“yesterday”"));
    assert!(lines[3].0 == 6 && lines[3].1.contains("neither a reference nor a key"));
    assert!(lines[4].0 == 7 && lines[4].1.contains("not closed"));
    assert!(lines[5].0 == 8 && lines[5].1.contains("the key"));
    assert!(lines[6].0 == 9 && lines[6].1.contains("longer than 16 KiB"));
}

#[test]
fn an_export_without_a_status_or_any_reference_column_is_refused_whole() {
    for (text, says) in [
        (
            "reference,key,time\nr1,k1,2026-12-05T01:00:00Z\n",
            "no status column",
        ),
        (
            "status,time\ndelivered,2026-12-05T01:00:00Z\n",
            "neither a reference column",
        ),
        ("reference,status\nr1,delivered\n", "no time column"),
        ("", "empty"),
        ("\n\n", "empty"),
    ] {
        let (good, _, refused) = read_in_chunks(text, "", 4096);
        assert!(good.is_empty());
        assert!(
            refused.as_deref().is_some_and(|r| r.contains(says)),
            "{text:?}: {refused:?}"
        );
    }
}

#[test]
fn status_words_on_the_form_come_before_the_usual_ones() {
    let words = StatusWords::parse("Sent=failed, soft_bounce = failed\nqueued=accepted").unwrap();
    assert_eq!(words.status("SENT"), Some(ProviderStatus::Failed));
    assert_eq!(words.status("soft_bounce"), Some(ProviderStatus::Failed));
    assert_eq!(words.status("delivered"), Some(ProviderStatus::Accepted));
    assert_eq!(words.status("maybe"), None);
    assert_eq!(
        words.to_text(),
        "sent=failed, soft_bounce=failed, queued=accepted"
    );
    for bad in ["queued", "queued=perhaps", "=accepted", "a\u{7}b=failed"] {
        assert!(StatusWords::parse(bad).is_err(), "{bad:?}");
    }
    let catalogue = StatusWords::parse("held=failed").unwrap();
    assert_eq!(
        words.or(&catalogue).status("held"),
        Some(ProviderStatus::Failed)
    );
}

#[test]
fn a_byte_order_mark_and_a_time_out_of_range_are_read_as_a_person_means_them() {
    let text = "\u{feff}key,status,time\nk1,delivered,2026-12-05T01:00:00Z\nk2,delivered,1\nk3,delivered,99999999999999\n";
    let (good, bad, refused) = read_in_chunks(text, "", 3);
    assert_eq!(refused, None, "the key column is found past the mark");
    assert_eq!(good.len(), 1);
    assert_eq!(good[0].key.as_ref().unwrap().as_str(), "k1");
    assert_eq!(bad.iter().map(|b| b.line).collect::<Vec<_>>(), [3, 4]);
    assert!(
        bad.iter()
            .all(|b| b.reason.contains("between 2000 and 2099")),
        "{bad:?}"
    );
}

#[test]
fn a_quoted_field_that_holds_line_breaks_is_one_record_numbered_by_its_first_line() {
    let text = "reference,key,status,description,time\r\n\
                ch_1,pay:1,succeeded,\"Invoice 7\r\n\
                \r\n\
                Berlin, \"\"Mitte\"\"\",2026-12-05T01:00:00Z\r\n\
                ch_2,pay:2,failed,plain,2026-12-05T01:00:01Z\r\n";
    for chunk in [1, 2, 5, 4096] {
        let (good, bad, refused) = read_in_chunks(text, "", chunk);
        assert_eq!(refused, None);
        assert_eq!(bad, Vec::new(), "chunk {chunk}");
        let read: Vec<(usize, &str)> = good
            .iter()
            .map(|r| (r.line, r.key.as_ref().unwrap().as_str()))
            .collect();
        assert_eq!(read, [(2, "pay:1"), (5, "pay:2")], "chunk {chunk}");
    }
}

#[test]
fn a_stray_quote_costs_its_own_record_not_those_after_it() {
    let text = "reference,key,status,time\n\
                r1,\"k1,delivered,2026-12-05T01:00:00Z\n\
                r2,k2,delivered,2026-12-05T01:00:01Z\n\
                r3,k3,failed,2026-12-05T01:00:02Z\n";
    let (good, bad, refused) = read_in_chunks(text, "", 7);
    assert_eq!(refused, None);
    assert_eq!(good.iter().map(|r| r.line).collect::<Vec<_>>(), [3, 4]);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0].line, 2);
    assert!(bad[0].reason.contains("not closed by the end"), "{bad:?}");

    // One that never closes is given up after so many lines, and the
    // lines it held are read each on its own.
    let mut text =
        String::from("reference,key,status,time\nr0,\"k0,delivered,2026-12-05T01:00:00Z\n");
    for n in 1..=EXPORT_MAX_RECORD_LINES + 5 {
        text += &format!("r{n},k{n},delivered,2026-12-05T01:00:00Z\n");
    }
    let (good, bad, _) = read_in_chunks(&text, "", 4096);
    assert_eq!(good.len(), EXPORT_MAX_RECORD_LINES + 5);
    assert_eq!(good[0].line, 3);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].reason.contains("within 32 lines"), "{bad:?}");
}

#[test]
fn a_record_that_runs_on_into_a_bad_one_gives_back_the_lines_it_held() {
    let text = "reference,key,status,description,time\n\
                r1,k1,delivered,\"stray,2026-12-05T01:00:00Z\n\
                r2,k2,delivered,plain,2026-12-05T01:00:01Z\n\
                r3,k3,delivered,\"two\n\
                lines\",2026-12-05T01:00:02Z\n\
                r4,k4,delivered,plain,2026-12-05T01:00:03Z\n";
    let (good, bad, _) = read_in_chunks(text, "", 16);
    assert_eq!(good.iter().map(|r| r.line).collect::<Vec<_>>(), [3, 6]);
    let lines: Vec<(usize, &str)> = bad.iter().map(|b| (b.line, b.reason.as_str())).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[0].0 == 2 && lines[0].1.contains("over 3 lines"),
        "{lines:?}"
    );
    assert!(lines[1].0 == 4 && lines[1].1.contains("not closed on this line"));
    assert!(lines[2].0 == 5 && lines[2].1.contains("a quote inside an unquoted field"));

    // A line whose quotes pair up but leave a field open has a stray
    // quote: it does not run on, so the lines after it are records.
    let text = "reference,key,status,time\n\
                r1,k\"1,\"delivered,2026-12-05T01:00:00Z\n\
                r2,k2,delivered,2026-12-05T01:00:01Z\n";
    let (good, bad, _) = read_in_chunks(text, "", 4096);
    assert_eq!(good.iter().map(|r| r.line).collect::<Vec<_>>(), [3]);
    assert_eq!(bad.iter().map(|b| b.line).collect::<Vec<_>>(), [2]);
}

#[test]
fn a_record_may_span_thirty_two_lines_and_sixteen_kib_its_closing_line_included() {
    let spanning = |lines: usize, last: &str| {
        let mut text =
            String::from("reference,key,status,description,time\nr1,k1,delivered,\"first");
        for _ in 2..lines {
            text += "\nmore";
        }
        text += &format!(
            "\n{last}\",2026-12-05T01:00:00Z\nr2,k2,delivered,plain,2026-12-05T01:00:01Z\n"
        );
        text
    };
    let (good, bad, _) = read_in_chunks(&spanning(EXPORT_MAX_RECORD_LINES, "end"), "", 4096);
    assert_eq!(bad, Vec::new());
    let lines = EXPORT_MAX_RECORD_LINES + 2;
    assert_eq!(good.iter().map(|r| r.line).collect::<Vec<_>>(), [2, lines]);

    let (good, bad, _) = read_in_chunks(&spanning(EXPORT_MAX_RECORD_LINES + 1, "end"), "", 4096);
    assert_eq!(good.iter().map(|r| r.line).collect::<Vec<_>>(), [lines + 1]);
    assert!(
        bad[0].line == 2 && bad[0].reason.contains("within 32 lines"),
        "{bad:?}"
    );

    let long = "x".repeat(EXPORT_MAX_LINE_BYTES - 30);
    let (good, bad, _) = read_in_chunks(&spanning(3, &long), "", 4096);
    assert_eq!(good.iter().map(|r| r.line).collect::<Vec<_>>(), [5]);
    assert!(
        bad[0].line == 2 && bad[0].reason.contains("16 KiB"),
        "{bad:?}"
    );
}
