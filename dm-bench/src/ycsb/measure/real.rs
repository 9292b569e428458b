//! Load, run and verification on the wall-clock fabrics (`loopback`,
//! `rdma`): one OS thread per core (`dm_runtime::run_threads`), each
//! running its coroutines, with the core threads' CPU time measured
//! ([`crate::cpu_time`]); with `--client I/N` this process's share of the
//! load and run, between barriers ([`crate::barrier`]: a byte per process
//! on MS 0) after creation, load and run.

use super::peers::{self, Peers};
use super::phase::{bulk_load, bulk_out, core_phase, Bars, Out, Phase};
use super::verify::verify_view;
use super::{Bench, Ran};
use crate::barrier::barrier;
use anyhow::{anyhow, Result};
use dm_index::Handle;
use dm_runtime::{ExecConfig, Executor};
use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
use dm_verbs::Fabric;
use indicatif::ProgressBar;
use serde_json::json;
use std::rc::Rc;

impl Bench {
    /// The run on `loopback`.
    pub(super) fn run_loopback(&self, bars: &Bars) -> Result<Ran> {
        let (a, ms_cfg) = (&self.a, self.cl.ms_cfg);
        let fabric = LoopbackFabric::new(LoopbackConfig {
            num_ms: a.ms,
            ms: ms_cfg,
            ..Default::default()
        });
        dm_index::register_handlers(&fabric);
        let q = fabric.open_queues(0, 0);
        let mut r = self.real_run(&fabric, q, bars)?;
        r.ms_used = (0..a.ms).map(|m| fabric.ms_bytes_used(m)).sum();
        r.fabric_detail = json!({});
        Ok(r)
    }

    /// The run on `rdma`, over the memory servers `fabric` reaches.
    #[cfg(feature = "rdma")]
    pub(super) fn run_rdma(&self, fabric: &dm_verbs::rdma::RdmaFabric, bars: &Bars) -> Result<Ran> {
        let (a, ci, cn, chunk) = (&self.a, self.c.ci, self.c.cn, self.cl.ms_cfg.chunk_bytes);
        let q = fabric.try_open_queues((ci * a.cs as usize) as u16, 0)?;
        let mut r = self.real_run(fabric, q, bars)?;
        // Chunks this client's cores took (the MSs' own totals stay on the MSs).
        let gone = r.fabric_detail["clients_gone"].take();
        r.fabric_detail = json!({"device": fabric.device_name(), "chunk_bytes": chunk, "client": ci, "clients": cn, "clients_gone": gone});
        r.ms_used = 0;
        Ok(r)
    }

    /// The run on a real fabric (loopback, rdma): one OS thread per core; with
    /// --client I/N, this process's share of the load and run, between
    /// barriers; with --lease-ms, its CSs joined and beating (`peers`).
    fn real_run<F: Fabric + Send + Sync>(
        &self,
        fabric: &F,
        q: F::Queues,
        bars: &Bars,
    ) -> Result<Ran> {
        let mut ex = Executor::new(q, self.a.ms, ExecConfig::default());
        let Some(ms) = self.a.lease_ms else {
            return self.phases(fabric, &mut ex, bars, None);
        };
        let cfg = peers::lease(ms)?;
        let members = peers::join(&mut ex, &self.cl.inst, cfg)?;
        let (c, a) = (&self.c, &self.a);
        let p = Peers::new(c.ci, c.cn, a.cs, members[0].clone());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            let hb = std::thread::Builder::new()
                .name("dm-heartbeat".into())
                .spawn_scoped(s, || peers::beat(fabric, &members, cfg, rx))?;
            let r = self.phases(fabric, &mut ex, bars, Some(p));
            drop(tx);
            let beat = hb
                .join()
                .map_err(|_| anyhow!("the heartbeat thread panicked"))?;
            let r = r?;
            beat.map_err(|e| {
                anyhow!("{e}: other clients may have taken this process's locks over")
            })?;
            Ok(r)
        })
    }

    /// Creation, load, warm-up, run and verification on `ex` and the core
    /// threads, meeting the other client processes between them (with
    /// `peers`, lease barriers; `--rejoin` meets nobody and loads nothing).
    fn phases<F: Fabric + Send + Sync>(
        &self,
        fabric: &F,
        ex: &mut Executor<F::Queues>,
        bars: &Bars,
        mut peers: Option<Peers>,
    ) -> Result<Ran> {
        let (a, plan, ci, cn) = (&self.a, &self.plan, self.c.ci, self.c.cn);
        let (load_pb, run_pb) = (&bars.load, &bars.run);
        let first = ci == 0 && !a.rejoin;
        let mut meet = |ex: &mut Executor<_>, k: u64| -> Result<()> {
            if a.rejoin {
                return Ok(());
            }
            match peers.take() {
                Some(p) => {
                    peers = Some(
                        ex.block_on(p.meet(k))
                            .map_err(|e| anyhow!("barrier {k}: {e}"))?,
                    )
                }
                None if cn > 1 => ex.block_on(barrier(ci, cn, k))?,
                None => {}
            }
            Ok(())
        };
        if first && a.load != "bulk" {
            ex.block_on(self.create()).map_err(|e| anyhow!("{e}"))?;
        }
        let phase = |ph: Phase, pb: &ProgressBar| self.threads_phase(fabric, ph, pb);
        let (lo, lns) = if a.rejoin {
            load_pb.finish_and_clear();
            (Out::new(), 0)
        } else if a.load == "bulk" {
            let t0 = std::time::Instant::now();
            if first {
                let fill = a.fill;
                ex.block_on(bulk_load(self.cl.inst.clone(), plan.clone(), fill))
                    .map_err(|e| anyhow!("{e}"))?;
            }
            meet(ex, 1)?;
            load_pb.finish_and_clear();
            let lo = if first { bulk_out(plan) } else { Out::new() };
            (lo, t0.elapsed().as_nanos() as u64)
        } else {
            meet(ex, 1)?;
            let (lo, lns, _) = phase(Phase::Load, load_pb);
            (lo, lns)
        };
        if let (true, Some(h)) = (first, plan.heads.clone()) {
            let t = self.open(0, 0);
            ex.block_on(async move { h.pass(&t).await });
        }
        // Barriers are numbered by meeting: a warm-up adds one.
        let w = (plan.warm > 0) as u64;
        let wo = if w == 1 {
            meet(ex, 2)?;
            Some(phase(Phase::Warmup, &bars.warm).0)
        } else {
            None
        };
        meet(ex, 2 + w)?;
        if a.lease_ms.is_some() && cn > 1 {
            eprintln!("client {ci}: run phase started");
        }
        let (mut ro, rns, rcpu) = phase(Phase::Run, run_pb);
        if let Some(wo) = wo {
            ro.merge_checks(wo);
        }
        if self.cl.dexcl().is_some() {
            // Every process writes its CSs' dirty pages back before any
            // verifies the pool.
            let t = self.open(0, 0);
            ex.block_on(async move {
                match t.handle() {
                    Handle::Dex(d) => d.flush().await.map(drop),
                    _ => Ok(()),
                }
            })
            .map_err(|e| anyhow!("flushing DEX's caches: {e}"))?;
        }
        meet(ex, 3 + w)?;
        let v = ex.block_on(verify_view(self.open(0, 0), plan.clone()));
        let gone = peers.as_ref().map(Peers::gone).unwrap_or_default();
        Ok(Ran {
            load: lo,
            run: ro,
            load_ns: lns,
            run_ns: rns,
            verified: v,
            run_cpu: Some(rcpu),
            fabric_detail: json!({ "clients_gone": gone }),
            ms_used: 0,
            run_fifo: (0, 0),
        })
    }

    /// One phase on every core thread: (counters, wall ns, (thread CPU ns,
    /// heap allocations) of the core threads).
    fn threads_phase<F: Fabric + Send + Sync>(
        &self,
        fabric: &F,
        ph: Phase,
        pb: &ProgressBar,
    ) -> (Out, u64, (u64, u64)) {
        let (plan, ci, cn) = (&self.plan, self.c.ci, self.c.cn);
        let l = &self.layout;
        let (cores, coros, total, ncores) = (&l.cores, l.coros, l.total, l.cores.len());
        let t0 = std::time::Instant::now();
        let outs = dm_runtime::run_threads(fabric, cores, true, |i| {
            let (cs, t) = cores[i];
            let (first, all, ids) = l.group(ci * ncores + i, cores[i], ph, coros, cn * total);
            // The core thread's CPU time over its share (crate::cpu_time).
            crate::cpu_time::on_thread(core_phase(
                Rc::new(self.open(cs, t)),
                plan.clone(),
                ph,
                first,
                coros,
                all,
                pb.clone(),
                ids,
            ))
        });
        let mut o = Out::new();
        let (mut cpu, mut allocs) = (0, 0);
        for (x, ns, n) in outs {
            o.merge(x);
            cpu += ns;
            allocs += n;
        }
        pb.finish();
        (o, t0.elapsed().as_nanos() as u64, (cpu, allocs))
    }
}
