//! `Namespace::seen_fingerprints_then` hands the answers on (`urlseen filter` prints them)
//! before anything of the batch is recorded, in every kind of namespace: a batch whose hand-on
//! fails is not recorded, so no URL is ever recorded without having been printed.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use urlseen_engine::{Db, DbOptions, Fsync, NamespaceOptions};

fn urls(tag: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("https://{tag}.example/page/{i}")).collect()
}

fn fingerprints(ns: &urlseen_engine::Namespace, urls: &[String]) -> Vec<u64> {
    urls.iter().map(|u| ns.fingerprint(u).unwrap()).collect()
}

fn a_failed_hand_on_records_nothing(options: NamespaceOptions) {
    let dir = tempfile::tempdir().unwrap();
    let db_options = || DbOptions { fsync: Fsync::Always, ..DbOptions::default() };
    let (printed, failed) = (urls("printed", 500), urls("failed", 500));
    {
        let db = Db::open_with(dir.path(), db_options()).unwrap();
        let ns = db.create_namespace("n", options.clone()).unwrap();
        let fps = fingerprints(&ns, &printed);
        let mut out = vec![false; fps.len()];
        let mut handed = 0;
        ns.seen_fingerprints_then(&fps, &mut out, &mut |answers| {
            handed += answers.iter().filter(|&&seen| !seen).count();
            Ok(())
        })
        .unwrap();
        assert_eq!(handed, printed.len(), "every URL of the first batch is new");

        let fps = fingerprints(&ns, &failed);
        let mut out = vec![false; fps.len()];
        let broken = ns.seen_fingerprints_then(&fps, &mut out, &mut |_| {
            Err(std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdout closed"))
        });
        assert!(broken.is_err(), "a failed hand-on fails the batch");
        assert!(out.iter().all(|&seen| !seen), "the failed batch was answered new");
    }
    let db = Db::open_with(dir.path(), db_options()).unwrap();
    let ns = db.namespace("n").unwrap();
    assert!(
        ns.contains_batch(&printed).unwrap().iter().all(|&seen| seen),
        "a printed URL was lost"
    );
    let recorded = ns.contains_batch(&failed).unwrap().iter().filter(|&&seen| seen).count();
    // Exact and counting namespaces have no false positives; a Bloom one at 1e-4 may have one.
    assert!(recorded <= usize::from(!options.exact), "{recorded} unprinted URLs were recorded");
}

#[test]
fn bloom() {
    a_failed_hand_on_records_nothing(NamespaceOptions { fpr: 1e-4, ..NamespaceOptions::default() });
}

#[test]
fn exact() {
    a_failed_hand_on_records_nothing(NamespaceOptions {
        exact: true,
        ..NamespaceOptions::default()
    });
}

#[test]
fn counting() {
    a_failed_hand_on_records_nothing(NamespaceOptions {
        exact: true,
        counting: true,
        ..NamespaceOptions::default()
    });
}
