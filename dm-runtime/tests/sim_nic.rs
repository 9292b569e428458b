//! The sim MS NIC's processing units (`NetModel::nic_pus`, issue 34).

mod common;

use common::{rt, small_cfg};
use dm_runtime::{cas, read};
use dm_verbs::GlobalAddr;

/// Sixteen failed CASes on one word from core 0 queue on its bucket (8,000
/// ns of bucket time). A round trip later cores 1 and 2 each READ another
/// word of the same MS. Without processing units both READs take about a
/// round trip. With two units core 2's QP shares core 0's unit, whose
/// queued CASes hold it, so its READ waits for them; core 1's does not.
#[test]
fn a_cas_queued_on_its_bucket_holds_back_the_qps_of_its_processing_unit() {
    let elapsed = |pus: u32| {
        let mut cfg = small_cfg();
        cfg.net.nic_pus = pus;
        let net = cfg.net;
        let mut r = rt(cfg);
        let spinner = r.add_core(0, 0);
        let other = r.add_core(1, 0);
        let same = r.add_core(0, 1);
        let a = GlobalAddr::new(0, 4096);
        r.spawn_on(spinner, async move {
            let ops = (0..16).map(|_| async move { cas(a, 1, 2).await.unwrap() });
            futures::future::join_all(ops).await;
        });
        let mut reader = |core| {
            r.spawn_on(core, async move {
                // One round trip elsewhere: the spinner's CASes are queued.
                read(GlobalAddr::new(1, 4096), 8).await.unwrap();
                let t0 = dm_runtime::now_ns();
                read(GlobalAddr::new(0, 8192), 8).await.unwrap();
                dm_runtime::now_ns() - t0
            })
        };
        let (o, s) = (reader(other), reader(same));
        r.run();
        let o = o.try_take().unwrap().unwrap();
        let s = s.try_take().unwrap().unwrap();
        (o, s, net)
    };
    let (o0, s0, net) = elapsed(0);
    let (o2, s2, _) = elapsed(2);
    let prompt = net.rtt_ns + net.host_cas_fail_ns;
    assert!(
        o0 < prompt && s0 < prompt,
        "without units: {o0} and {s0} ns"
    );
    assert!(o2 < prompt, "another unit's QP waited: {o2} ns");
    assert!(
        s2 >= s0 + 8 * net.host_cas_fail_ns,
        "{s2} ns against {s0}: the READ did not wait behind its unit's CASes"
    );
}
