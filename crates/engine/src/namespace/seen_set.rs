//! [`SeenSet`] for the process's own namespaces: each method is the [`Namespace`]'s own, and a
//! held batch's answers go to `then` before they count as recorded.

use super::Namespace;
use crate::error::{Error, Result};
use crate::seen_set::{SeenSet, SeenThenError};

impl SeenSet for Namespace {
    type Error = Error;

    fn fingerprint(&self, url: &str) -> Result<u64> {
        Namespace::fingerprint(self, url)
    }

    fn seen_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        Namespace::seen_fingerprints(self, fps, out)
    }

    fn seen_fingerprints_hosts(&self, fps: &[u64], hosts: &[u32], out: &mut [bool]) -> Result<()> {
        Namespace::seen_fingerprints_hosts(self, fps, hosts, out)
    }

    fn fingerprint_host(&self, url: &str) -> Result<(u64, u32)> {
        Namespace::fingerprint_host(self, url)
    }

    fn fingerprint_hosts(&self, urls: &[&str], out: &mut Vec<Result<(u64, u32)>>) {
        Namespace::fingerprint_hosts(self, urls, out);
    }

    fn seen(&self, url: &str) -> Result<bool> {
        Namespace::seen(self, url)
    }

    fn seen_batch<S: AsRef<str>>(&self, urls: &[S]) -> Result<Vec<bool>> {
        Namespace::seen_batch(self, urls)
    }

    fn seen_fingerprints_then(
        &self,
        fps: &[u64],
        out: &mut [bool],
        then: &mut dyn FnMut(&[bool]) -> std::io::Result<()>,
    ) -> Result<(), SeenThenError<Error>> {
        SeenSet::seen_fingerprints_hosts_then(self, fps, &[], out, then)
    }

    fn seen_fingerprints_hosts_then(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        then: &mut dyn FnMut(&[bool]) -> std::io::Result<()>,
    ) -> Result<(), SeenThenError<Error>> {
        let mut failed = None;
        let result =
            Namespace::seen_fingerprints_hosts_then(self, fps, hosts, out, &mut |answers| {
                then(answers)
                    .inspect_err(|e| failed = Some(std::io::Error::new(e.kind(), e.to_string())))
            });
        match (result, failed) {
            (Ok(()), _) => Ok(()),
            (Err(_), Some(e)) => Err(SeenThenError::Then(e)),
            (Err(e), None) => Err(SeenThenError::Backend(e)),
        }
    }

    fn contains_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        Namespace::contains_fingerprints(self, fps, out)
    }
}
