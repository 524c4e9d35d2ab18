//! Layout quality over a corpus of definitions: the examples, hand-written ones and generated
//! ones up to 200 steps. Each must draw with no overlapping boxes, no edge through a box,
//! every edge from its source's border to its target's, and the same bytes every time; the
//! crossings are reported.

use ratchet_workflow::Workflow;

mod generate;
use generate::{document, generated};

/// Small definitions that each stress one shape.
const HAND_WRITTEN: &[(&str, &str)] = &[
    ("sequence", "do:\n  - a:\n      call: a\n  - b:\n      call: b\n  - c:\n      set:\n        x: 1\n"),
    (
        "loop-back",
        "do:\n  - fetch:\n      call: fetch\n  - check:\n      switch:\n        - again:\n            when: ${ .more }\n            then: fetch\n        - done:\n            then: continue\n  - store:\n      call: store\n",
    ),
    (
        "self-loop",
        "do:\n  - poll:\n      switch:\n        - wait:\n            when: ${ .pending }\n            then: poll\n        - go:\n            then: continue\n  - use:\n      call: use\n",
    ),
    (
        "diamond",
        "do:\n  - route:\n      switch:\n        - left:\n            when: ${ .left }\n            then: l\n        - right:\n            then: r\n  - l:\n      call: l\n      then: join\n  - r:\n      call: r\n  - join:\n      call: join\n",
    ),
    (
        "early-end",
        "do:\n  - check:\n      switch:\n        - stop:\n            when: ${ .stop }\n            then: end\n        - go:\n            then: continue\n  - work:\n      call: work\n",
    ),
    (
        "wide-fork",
        "do:\n  - all:\n      fork:\n        compete: false\n        branches:\n          - a:\n              call: a\n          - b:\n              call: b\n          - c:\n              call: c\n          - d:\n              call: d\n          - e:\n              call: e\n          - f:\n              call: f\n  - after:\n      call: after\n",
    ),
    (
        "race",
        "do:\n  - first:\n      fork:\n        compete: true\n        branches:\n          - answer:\n              listen:\n                to:\n                  one:\n                    with:\n                      type: answer\n          - give-up:\n              wait: PT1H\n",
    ),
    (
        "nested-loops",
        "do:\n  - rows:\n      for:\n        each: row\n        in: ${ .rows }\n      do:\n        - cells:\n            for:\n              each: cell\n              in: ${ $row.cells }\n            do:\n              - paint:\n                  call: paint\n        - mark:\n            call: mark\n",
    ),
    (
        "saga",
        "do:\n  - book:\n      try:\n        - flight:\n            call: flight\n        - hotel:\n            call: hotel\n      catch:\n        errors:\n          with:\n            type: urn:ratchet:errors:cancelled\n        do:\n          - unbook-hotel:\n              call: unbook_hotel\n          - unbook-flight:\n              call: unbook_flight\n  - confirm:\n      call: confirm\n",
    ),
    (
        "exit-inside",
        "do:\n  - block:\n      do:\n        - look:\n            switch:\n              - out:\n                  when: ${ .out }\n                  then: exit\n              - on:\n                  then: continue\n        - more:\n            call: more\n  - last:\n      call: last\n",
    ),
    (
        "long-labels",
        "do:\n  - a-task-with-a-rather-long-name-that-goes-on-and-on-and-on:\n      call: an_activity_whose_name_is_also_far_longer_than_it_should_be\n  - b:\n      wait: PT5M\n",
    ),
];

fn corpus() -> Vec<(String, String)> {
    let mut corpus = Vec::new();
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/workflows");
    let mut files: Vec<_> = std::fs::read_dir(examples)
        .expect("examples/workflows is there")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("an example reads");
        corpus.push((file.display().to_string(), source));
    }
    for (name, body) in HAND_WRITTEN {
        corpus.push(((*name).to_string(), document(name, body)));
    }
    for (seed, steps) in [
        5, 8, 12, 16, 20, 25, 30, 40, 50, 60, 75, 90, 100, 120, 140, 160, 180, 200, 200, 200,
    ]
    .into_iter()
    .enumerate()
    {
        let source = generated(seed as u64 + 1, steps);
        corpus.push((format!("generated #{seed} ({steps} steps)"), source));
    }
    corpus
}

#[test]
fn every_definition_of_the_corpus_lays_out_cleanly() {
    let corpus = corpus();
    assert!(
        corpus.len() >= 30,
        "the corpus has {} definitions",
        corpus.len()
    );
    let mut total_crossings = 0;
    for (name, source) in &corpus {
        let workflow = Workflow::compile(source)
            .unwrap_or_else(|e| panic!("{name} does not compile: {e}\n{source}"));
        let graph = workflow.graph();
        let layout = ratchet_graph::layout(&graph);
        let problems = layout.problems();
        assert!(problems.is_empty(), "{name}: {problems:#?}");
        let svg = ratchet_graph::svg(&layout);
        assert_eq!(
            svg,
            workflow.render(),
            "{name}: the same definition drew differently"
        );
        let crossings = layout.crossings();
        total_crossings += crossings;
        println!(
            "{name}: {} nodes, {} edges, {crossings} crossings, {:.0}x{:.0}",
            layout.boxes.len(),
            layout.edges.len(),
            layout.width,
            layout.height
        );
    }
    println!(
        "{} definitions, {total_crossings} crossings in all",
        corpus.len()
    );
}

#[test]
fn generated_definitions_reach_two_hundred_steps() {
    let workflow = Workflow::compile(&generated(18, 200)).expect("compiles");
    assert!(
        workflow.graph().len() >= 200,
        "{} nodes",
        workflow.graph().len()
    );
}

#[test]
fn a_switch_draws_its_cases_as_labelled_edges_and_a_loop_back() {
    let (_, body) = HAND_WRITTEN[1];
    let workflow = Workflow::compile(&document("loop-back", body)).expect("compiles");
    let svg = workflow.render();
    for expected in [
        ">again<",
        ">done<",
        ">fetch<",
        ">store<",
        "class=\"decision",
    ] {
        assert!(svg.contains(expected), "no {expected} in {svg}");
    }
}

#[test]
fn the_graphs_in_the_docs_are_what_the_examples_draw() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    for name in ["insurance", "every-kind"] {
        let source = std::fs::read_to_string(format!("{root}/examples/workflows/{name}.yaml"))
            .expect("the example reads");
        let drawn = Workflow::compile(&source).expect("compiles").render();
        let docs = std::fs::read_to_string(format!("{root}/docs/graphs/{name}.svg"))
            .expect("the docs' copy reads");
        assert!(
            drawn == docs,
            "docs/graphs/{name}.svg is stale: ratchet workflows render examples/workflows/{name}.yaml -o docs/graphs/{name}.svg"
        );
    }
}
