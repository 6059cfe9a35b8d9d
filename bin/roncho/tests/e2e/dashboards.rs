//! The Grafana dashboard and the Prometheus alert rules that ship in the
//! Helm chart (`helm/roncho/files/`, mounted by compose.yaml too) ask only
//! for metrics the server exports: every metric a query names is one a
//! process serves at `/metrics`, under the name a sample of its kind takes
//! (a counter's `_total`, a histogram's `_bucket`, `_sum` and `_count`).

use std::collections::BTreeSet;

use roncho::metrics::Metrics;
use serde_json::Value;

const DASHBOARD: &str = include_str!("../../../../helm/roncho/files/grafana-dashboard.json");
const RULES: &str = include_str!("../../../../helm/roncho/files/prometheus-rules.yaml");

/// Every sample name a process can export.
fn exported() -> BTreeSet<String> {
    let names: BTreeSet<String> = Metrics::new().sample_names().iter().cloned().collect();
    // The names are the ones the text format gives a recorded sample.
    let recorded = Metrics::new().encode();
    for line in recorded
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
    {
        let sample = line.split(['{', ' ']).next().unwrap_or_default();
        assert!(names.contains(sample), "{sample} is exported but not named");
    }
    names
}

/// The metrics `expr` names: its identifiers that start with `roncho_`
/// (quoted strings, label values and regexes, are skipped).
fn metrics_named(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut quoted = false;
    let mut word = String::new();
    for character in expr.chars().chain([' ']) {
        if character == '"' {
            quoted = !quoted;
            word.clear();
            continue;
        }
        if !quoted && (character.is_ascii_alphanumeric() || character == '_' || character == ':') {
            word.push(character);
            continue;
        }
        if word.starts_with("roncho_") {
            names.push(std::mem::take(&mut word));
        }
        word.clear();
    }
    names
}

/// Every query of the dashboard: its panels' targets and its variables'.
fn dashboard_queries(dashboard: &Value) -> Vec<String> {
    let mut queries = Vec::new();
    let panels = dashboard["panels"].as_array().expect("panels");
    for panel in panels {
        for target in panel["targets"].as_array().into_iter().flatten() {
            queries.push(target["expr"].as_str().expect("every target has an expr").to_owned());
        }
    }
    for variable in dashboard["templating"]["list"].as_array().expect("variables") {
        if let Some(definition) = variable["definition"].as_str() {
            queries.push(definition.to_owned());
        }
    }
    queries
}

/// The alert rules' expressions, and every other line of the file, as text:
/// a metric named anywhere in it must be exported.
fn rule_expressions(rules: &str) -> Vec<String> {
    let mut expressions = Vec::new();
    let mut lines = rules.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(expr) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let indent = line.len() - line.trim_start().len();
        let mut text = expr.trim().to_owned();
        if text == ">-" || text == "|" || text == ">" {
            text.clear();
            while let Some(next) = lines.next_if(|next| next.len() - next.trim_start().len() > indent) {
                text.push(' ');
                text.push_str(next.trim());
            }
        }
        expressions.push(text);
    }
    expressions
}

#[test]
fn the_dashboard_and_the_alert_rules_ask_only_for_metrics_the_server_exports() {
    let exported = exported();
    assert!(exported.contains("roncho_requests_total"), "{exported:?}");
    assert!(
        exported.contains("roncho_request_duration_seconds_bucket"),
        "{exported:?}"
    );

    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 20, "{queries:?}");
    let rules = rule_expressions(RULES);
    assert_eq!(
        rules.len(),
        RULES.matches("- alert:").count(),
        "every alert has an expression: {rules:?}"
    );
    let mut named = BTreeSet::new();
    for query in queries.iter().chain(&rules) {
        let metrics = metrics_named(query);
        assert!(!metrics.is_empty(), "`{query}` names no roncho metric");
        for metric in metrics {
            assert!(
                exported.contains(&metric),
                "`{query}` asks for {metric}, which no process exports; exported: {exported:?}"
            );
            named.insert(metric);
        }
    }
    // A rate is taken of what only grows: a counter's samples (a gauge's
    // rate means nothing, and resets are not seen).
    for query in queries.iter().chain(&rules) {
        for (at, _) in query.match_indices("rate(").chain(query.match_indices("increase(")) {
            let Some(metric) = metrics_named(&query[at..]).into_iter().next() else {
                continue;
            };
            assert!(
                ["_total", "_bucket", "_sum", "_count"]
                    .iter()
                    .any(|suffix| metric.ends_with(suffix)),
                "`{query}` takes the rate of {metric}, which is not a counter's sample"
            );
        }
    }
    // Metrics named anywhere else in the rules (their descriptions) too.
    for metric in metrics_named(RULES) {
        assert!(
            exported.contains(&metric),
            "the rules name {metric}, which no process exports"
        );
    }
    // What the issue asks the dashboard to show, each by its metric.
    for wanted in [
        "roncho_requests_total",
        "roncho_request_duration_seconds_bucket",
        "roncho_queue_tasks",
        "roncho_queue_oldest_pending_age_seconds",
        "roncho_derivation_degraded",
        "roncho_text_index_backlog_messages",
        "roncho_vector_sync_rows",
        "roncho_requests_shed_total",
        "roncho_connections_open",
    ] {
        assert!(named.contains(wanted), "nothing shows {wanted}");
    }
}

#[test]
fn metric_names_are_read_out_of_queries_and_rules() {
    assert_eq!(
        metrics_named(r#"sum by (wire) (rate(roncho_requests_total{status="roncho_not_a_metric"}[5m])) / roncho_x"#),
        ["roncho_requests_total", "roncho_x"]
    );
    let rules = "      - alert: A\n        expr: >-\n          sum(roncho_a)\n          / sum(roncho_b)\n        for: 5m\n      - alert: B\n        expr: roncho_c > 0\n";
    assert_eq!(
        rule_expressions(rules),
        [" sum(roncho_a) / sum(roncho_b)", "roncho_c > 0"]
    );
}
