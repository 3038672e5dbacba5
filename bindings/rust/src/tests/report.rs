//! Reports and checkpoints, read back into memory.

use super::{fresh_tag, is_json};
use crate::{checkpoint, checkpoint_report, report, report_detail, Format};

#[test]
fn the_text_report_has_a_row_for_the_tag_and_the_summary_rows() {
    let t = fresh_tag("report-text");
    let held = t.scope(|| vec![1u8; 100_000]);
    let text = report(Format::Text).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("rust-unit/report-text ")),
        "{}",
        text
    );
    for row in ["untagged", "total"] {
        assert!(
            text.lines().any(|l| l.starts_with(row)),
            "no {} row in\n{}",
            row,
            text
        );
    }
    drop(held);
}

#[test]
fn the_json_report_is_one_document_naming_the_tag() {
    let t = fresh_tag("report-json");
    let held = t.scope(|| vec![1u8; 100_000]);
    let json = report(Format::Json).unwrap();
    assert!(is_json(&json), "not JSON:\n{}", json);
    assert!(json.contains("\"regionalloc-report-1\""));
    assert!(json.contains("\"rust-unit/report-json\""));
    drop(held);
}

#[test]
fn a_detail_report_is_a_report_in_every_format() {
    let t = fresh_tag("report-detail");
    let held = t.scope(|| vec![1u8; 100_000]);
    let text = report_detail(Format::Text).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("rust-unit/report-detail ")),
        "{}",
        text
    );
    let json = report_detail(Format::Json).unwrap();
    assert!(is_json(&json), "not JSON:\n{}", json);
    assert!(json.contains("\"rust-unit/report-detail\""));
    let prom = report_detail(Format::Prometheus).unwrap();
    assert!(prom.contains("regionalloc_tag_allocated_bytes{tag=\"rust-unit/report-detail\"} "));
    drop(held);
}

#[test]
fn the_prometheus_report_has_a_series_per_figure_of_the_tag() {
    let _t = fresh_tag("report-prom");
    let prom = report(Format::Prometheus).unwrap();
    for line in prom.lines().filter(|l| !l.is_empty()) {
        if line.starts_with('#') {
            assert!(
                line.starts_with("# HELP ") || line.starts_with("# TYPE "),
                "{}",
                line
            );
            continue;
        }
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "no value: {}", line);
    }
    assert!(prom.contains("regionalloc_tag_allocated_bytes{tag=\"rust-unit/report-prom\"} "));
}

#[test]
fn a_checkpoint_shows_in_every_format_of_the_checkpoint_report() {
    let t = fresh_tag("checkpoint");
    let held = t.scope(|| vec![1u8; 100_000]);
    checkpoint("rust-unit checkpoint").unwrap();
    let text = checkpoint_report(Format::Text).unwrap();
    assert!(text.contains("rust-unit checkpoint"), "{}", text);
    let json = checkpoint_report(Format::Json).unwrap();
    assert!(is_json(&json), "not JSON:\n{}", json);
    assert!(json.contains("\"regionalloc-checkpoints-1\""));
    let prom = checkpoint_report(Format::Prometheus).unwrap();
    assert!(prom.contains("checkpoint=\"rust-unit checkpoint\""));
    drop(held);
}

#[test]
fn a_label_holding_a_nul_is_einval_and_an_empty_one_is_fine() {
    assert_eq!(checkpoint("a\0b").unwrap_err().raw_os_error(), Some(22));
    checkpoint("").unwrap();
}
