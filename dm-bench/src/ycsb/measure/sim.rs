//! Load, run and verification on `sim`: every core of the cluster is a
//! task set of one simulated runtime ([`dm_runtime::SimRuntime`]), all in
//! virtual time and deterministic for a seed (the report gives the trace
//! hash); afterwards the optional [`Warm`] hook runs on the cluster as it
//! is (`dm-bench trace`).

use super::phase::{bulk_load, bulk_out, core_phase, Bars, Out, Phase};
use super::verify::verify_view;
use super::{Bench, Ran, Warm, WarmHook};
use crate::verbs_bench::TearArg;
use anyhow::{anyhow, Result};
use dm_index::Index;
use dm_runtime::JoinError;
use dm_runtime::{SimCore, SimRuntime};
use dm_verbs::sim::{Faults, SimConfig, SimFabric, TearGranularity};
use indicatif::ProgressBar;
use serde_json::json;
use std::rc::Rc;

impl Bench {
    /// The run on `sim`; `after` then runs on the cluster.
    pub(super) fn run_sim(&self, bars: &Bars, mut after: Option<WarmHook<'_>>) -> Result<Ran> {
        let (a, plan, cores, ms_cfg) = (&self.a, &self.plan, &self.layout.cores, self.cl.ms_cfg);
        let (load_pb, run_pb) = (&bars.load, &bars.run);
        let tear = match a.tear {
            TearArg::Off => TearGranularity::Off,
            TearArg::Line => TearGranularity::CacheLine,
            TearArg::Word => TearGranularity::Word,
        };
        let cfg = SimConfig {
            num_ms: a.ms,
            ms: ms_cfg,
            faults: Faults {
                tear,
                ..Default::default()
            },
            net: a.net.net(),
            seed: a.seed,
            ..Default::default()
        };
        let fabric = SimFabric::new(cfg);
        dm_index::register_handlers(&fabric);
        let mut rt = SimRuntime::new(fabric.clone());
        let sc: Vec<_> = cores.iter().map(|&(cs, t)| rt.add_core(cs, t)).collect();
        rt.block_on(sc[0], self.create())
            .unwrap()
            .map_err(|e| anyhow!("{e}"))?;
        let trees: Vec<Rc<Index>> = cores
            .iter()
            .map(|&(cs, t)| Rc::new(self.open(cs, t)))
            .collect();
        let phase = |rt: &mut SimRuntime, ph: Phase, pb: &ProgressBar| {
            self.sim_phase(rt, &sc, &trees, ph, pb)
        };
        let (lo, lns) = if a.load == "bulk" {
            let t0 = rt.fabric().now_ns();
            let fill = a.fill;
            rt.block_on(sc[0], bulk_load(self.cl.inst.clone(), plan.clone(), fill))
                .unwrap()
                .map_err(|e| anyhow!("{e}"))?;
            load_pb.finish_and_clear();
            (bulk_out(plan), rt.fabric().now_ns() - t0)
        } else {
            phase(&mut rt, Phase::Load, load_pb)
        };
        if let Some(h) = plan.heads.clone() {
            let t = self.open(0, 0);
            rt.block_on(sc[0], async move { h.pass(&t).await });
        }
        let wo = (plan.warm > 0).then(|| phase(&mut rt, Phase::Warmup, &bars.warm).0);
        let f0 = self.fifo_totals();
        let (mut ro, rns) = phase(&mut rt, Phase::Run, run_pb);
        let f1 = self.fifo_totals();
        if let Some(wo) = wo {
            ro.merge_checks(wo);
        }
        let v = rt
            .block_on(sc[0], verify_view(self.open(0, 0), plan.clone()))
            .unwrap();
        if let Some(h) = after.as_mut() {
            h(Warm {
                rt: &mut rt,
                places: cores,
                sim_cores: &sc,
                trees: &trees,
            })?;
        }
        let used: u64 = (0..a.ms).map(|m| fabric.ms_bytes_used(m)).sum();
        let detail = json!({"trace_hash": format!("{:016x}", fabric.trace_hash()), "tear": format!("{tear:?}"), "net": format!("{:?}", cfg.net)});
        Ok(Ran {
            load: lo,
            run: ro,
            load_ns: lns,
            run_ns: rns,
            verified: v,
            run_cpu: None,
            fabric_detail: detail,
            ms_used: used,
            run_fifo: (f1.0 - f0.0, f1.1 - f0.1),
        })
    }

    /// One phase on every core: (counters, virtual ns).
    fn sim_phase(
        &self,
        rt: &mut SimRuntime,
        sc: &[SimCore],
        trees: &[Rc<Index>],
        ph: Phase,
        pb: &ProgressBar,
    ) -> (Out, u64) {
        let (plan, l) = (&self.plan, &self.layout);
        let (cores, coros, total) = (&l.cores, l.coros, l.total);
        let t0 = rt.fabric().now_ns();
        let hs: Vec<_> = sc
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let (first, all, ids) = l.group(i, cores[i], ph, coros, total);
                rt.spawn_on(
                    c,
                    core_phase(
                        trees[i].clone(),
                        plan.clone(),
                        ph,
                        first,
                        coros,
                        all,
                        pb.clone(),
                        ids,
                    ),
                )
            })
            .collect();
        let t1 = rt.run();
        let mut o = Out::new();
        for h in hs {
            o.merge(
                h.try_take()
                    .expect("core finished")
                    .unwrap_or_else(JoinError::resume),
            );
        }
        pb.finish();
        (o, t1 - t0)
    }
}
