//! [`Cluster`]: the fabric, this process's compute servers and their core
//! threads (`dm_runtime::service`), and the indexes opened in it, by name
//! through the catalog on memory server 0 (`dm_runtime::catalog`).
//!
//! The protocol a cluster follows for the caller (what `dm-bench` spelled
//! out by hand before): the MS RPC handlers of the NAM designs and DEX are
//! registered on sim and loopback (`dm-memserver` registers them on rdma);
//! an index's chunk size, MS count and lock-table placement come from the
//! fabric (`LockTableConfig::for_caps`); it is created once, from this
//! process's first core, under a catalog name, and every core opens its
//! own handle on first use, with its compute server's shared cache, local
//! lock table (HOCL) and SMART's read-delegation table attached.

use crate::client::Client;
use crate::config::{IndexConfig, Root, Site};
use crate::error::Error;
use crate::index::Instance;
use crate::membership::Membership;
use dm_runtime::catalog;
use dm_runtime::lock::{LeaseConfig, Member};
use dm_runtime::service::{Runtime, ServiceConfig, Spawner};
use dm_verbs::loopback::{LoopbackConfig, LoopbackFabric};
use dm_verbs::sim::{SimConfig, SimFabric};
use dm_verbs::{Caps, Fabric, VerbStats};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Which fabric the cluster runs on.
// A configuration, built once per cluster: its size does not matter, and
// `FabricSpec::Sim(cfg)` stays as users write it (no `Box`).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum FabricSpec {
    /// The simulator: every core of this process runs on one OS thread in
    /// virtual time (`dm_verbs::sim`); for tests and teaching.
    Sim(SimConfig),
    /// Memory servers in this process's memory, reached by real loads,
    /// stores and atomics with the RDMA semantics (`dm_verbs::loopback`).
    Loopback(LoopbackConfig),
    /// Real RDMA: `dm-memserver` processes at these addresses.
    #[cfg(feature = "rdma")]
    Rdma {
        cfg: dm_verbs::rdma::RdmaConfig,
        memory_servers: Vec<std::net::SocketAddr>,
    },
}

/// Builds a [`Cluster`]; see [`Cluster::builder`].
#[derive(Clone, Debug)]
pub struct ClusterBuilder {
    fabric: FabricSpec,
    first_cs: u16,
    cs: u16,
    cores_per_cs: u16,
    total_cs: Option<u16>,
    service: ServiceConfig,
    lease: Option<LeaseConfig>,
}

impl ClusterBuilder {
    /// Makes this process's compute servers members (issue 33,
    /// `dm_runtime::lock::member`): each joins the membership table with a
    /// new incarnation when the cluster starts, a heartbeat thread renews
    /// it every `lease.heartbeat_ns` of wall time, and every index opened
    /// takes over the locks of members dead for `lease.lease_ns` (the
    /// module `membership` docs; [`LeaseConfig::REAL`] is 1 ms and 10 ms).
    /// Every process of a deployment sets it, or none. Loopback and rdma
    /// only: on sim, `build` fails with `BadConfig` (`dm-bench check
    /// --faults crash` exercises it there, in virtual time).
    pub fn lease(mut self, lease: LeaseConfig) -> Self {
        self.lease = Some(lease);
        self
    }

    /// On `fabric`.
    pub fn fabric(mut self, fabric: FabricSpec) -> Self {
        self.fabric = fabric;
        self
    }

    /// This process runs compute servers `first..first + count` (default
    /// 0..1). Every process of a deployment must use distinct CS ids: a CS
    /// id and a core number name a lock holder.
    pub fn compute_servers(mut self, first: u16, count: u16) -> Self {
        self.first_cs = first;
        self.cs = count;
        self
    }

    /// Cores (OS threads, or sim cores) per compute server (default 1).
    pub fn cores_per_cs(mut self, n: u16) -> Self {
        self.cores_per_cs = n;
        self
    }

    /// Compute servers of the whole deployment, over every process
    /// (default: this process's last CS id + 1): DEX partitions the keys
    /// over them.
    pub fn total_compute_servers(mut self, n: u16) -> Self {
        self.total_cs = Some(n);
        self
    }

    /// The core threads' tuning: pinning, spin before parking, queue depth.
    pub fn service(mut self, cfg: ServiceConfig) -> Self {
        self.service = cfg;
        self
    }

    /// Connects the fabric and starts the core threads. Errors:
    /// `BadConfig` for zero compute servers or cores, CS ids past 65534,
    /// more than [`MAX_CORES`] cores (OS threads; [`MAX_SIM_CORES`] on
    /// sim), a lease whose heartbeat period is 0 or more than a third of
    /// it, memory servers that cannot hold a chunk ([`check_ms`]), a
    /// loopback region this process cannot allocate, or a fabric that
    /// cannot be reached.
    pub fn build(self) -> Result<Cluster, Error> {
        let end = self.first_cs as u32 + self.cs as u32;
        if self.cs == 0 || self.cores_per_cs == 0 || end > u16::MAX as u32 {
            return Err(Error::BadConfig(format!(
                "{} compute servers from {} with {} cores each",
                self.cs, self.first_cs, self.cores_per_cs
            )));
        }
        let cores = self.cs as u64 * self.cores_per_cs as u64;
        let max = match self.fabric {
            FabricSpec::Sim(_) => MAX_SIM_CORES,
            _ => MAX_CORES,
        };
        if cores > max {
            return Err(Error::BadConfig(format!(
                "{cores} cores ({} compute servers x {}): at most {max} in one process",
                self.cs, self.cores_per_cs
            )));
        }
        if let Some(l) = self.lease {
            LeaseConfig::new(l.heartbeat_ns, l.lease_ns)
                .map_err(|e| Error::BadConfig(format!("lease: {e}")))?;
        }
        match &self.fabric {
            FabricSpec::Sim(c) => check_ms(c.num_ms, &c.ms)?,
            FabricSpec::Loopback(c) => check_ms(c.num_ms, &c.ms)?,
            #[cfg(feature = "rdma")]
            FabricSpec::Rdma { .. } => {}
        }
        if self.lease.is_some() && matches!(self.fabric, FabricSpec::Sim(_)) {
            return Err(Error::BadConfig(
                "a lease needs wall-clock heartbeats: loopback or rdma (on sim, dm-bench check \
                 --faults crash runs members in virtual time)"
                    .into(),
            ));
        }
        if let Some(w) = self.lease.and_then(|l| l.oversubscribed(cores as usize)) {
            tracing::warn!("{w}");
        }
        let total = self.total_cs.unwrap_or(end as u16);
        if (total as u32) < end {
            return Err(Error::BadConfig(format!(
                "total_compute_servers {total} below this process's last CS {}",
                end - 1
            )));
        }
        let cores: Vec<(u16, u16)> = (self.first_cs..end as u16)
            .flat_map(|cs| (0..self.cores_per_cs).map(move |c| (cs, c)))
            .collect();
        let (rt, num_ms, ms, caps) = match self.fabric {
            FabricSpec::Sim(c) => {
                let caps = Caps {
                    masked_cas: c.masked_cas,
                    device_memory_bytes: c.ms.device_bytes,
                };
                let make = move || {
                    let f = SimFabric::new(c);
                    register_handlers(&f);
                    f
                };
                let rt = Runtime::start_sim(make, &cores, self.service);
                (rt, c.num_ms, c.ms, caps)
            }
            FabricSpec::Loopback(c) => {
                let f = LoopbackFabric::try_new(c).map_err(Error::BadConfig)?;
                register_handlers(&f);
                let caps = f.caps();
                (
                    Runtime::start(Arc::new(f), &cores, self.service),
                    c.num_ms,
                    c.ms,
                    caps,
                )
            }
            #[cfg(feature = "rdma")]
            FabricSpec::Rdma {
                cfg,
                memory_servers,
            } => {
                let f = dm_verbs::rdma::RdmaFabric::connect(cfg, &memory_servers)
                    .map_err(|e| Error::BadConfig(format!("rdma: {e}")))?;
                let (n, ms, caps) = (f.num_ms(), f.ms_config(), f.caps());
                (
                    Runtime::start(Arc::new(f), &cores, self.service),
                    n,
                    ms,
                    caps,
                )
            }
        };
        let site = Site {
            chunk_bytes: ms.chunk_bytes,
            num_ms,
            caps,
            num_cs: total,
            local_cs: self.first_cs..end as u16,
        };
        let spawners: Vec<Spawner> = (0..cores.len()).map(|i| rt.spawner(i)).collect();
        let membership = match self.lease {
            Some(lease) => {
                let first = cores
                    .iter()
                    .zip(&spawners)
                    .filter(|((_, core), _)| *core == 0)
                    .map(|((cs, _), sp)| (*cs, sp.clone()))
                    .collect();
                Some(Membership::start(first, lease, site.chunk_bytes)?)
            }
            None => None,
        };
        Ok(Cluster {
            spawners,
            rt: Mutex::new(rt),
            site,
            cores,
            open: Mutex::new(HashMap::new()),
            membership,
        })
    }
}

/// Registers the MS-side RPC handlers every index may need (the NAM
/// designs' `dm_tree::nam::RPC_NAM`, DEX's offloading `dm_tree::dex::RPC_DEX`)
/// on `f`'s memory servers: sim and loopback, whose memory servers live in
/// this process (`dm-memserver` has them built in). [`Cluster`] does it;
/// a tool that builds its own fabric calls it once.
pub fn register_handlers<F: Fabric>(f: &F) {
    f.register_rpc(dm_tree::nam::RPC_NAM, dm_tree::nam::ms::handler());
    f.register_rpc(dm_tree::dex::RPC_DEX, dm_tree::dex::ms::handler());
}

/// A running cluster: this process's compute servers with one thread per
/// core (one thread for all on sim), and the indexes opened through it.
/// `Send + Sync`; keep it for the life of the service and call
/// [`Cluster::shutdown`] at the end (dropping it shuts down too).
pub struct Cluster {
    /// The core threads (in a mutex only so that the cluster is `Sync`).
    rt: Mutex<Runtime>,
    /// A spawner per core, in `cores` order.
    spawners: Vec<Spawner>,
    site: Site,
    cores: Vec<(u16, u16)>,
    /// Indexes opened in this process, by name (one [`Instance`] each, so
    /// every client of a name shares its caches).
    open: Mutex<HashMap<String, Arc<Instance>>>,
    /// The CSs' membership and heartbeat thread, with a lease.
    membership: Option<Membership>,
}

/// What a cluster did, returned by [`Cluster::shutdown`].
#[derive(Clone, Debug, Default)]
pub struct ClusterStats {
    /// Verb totals of each core, in `(cs, core)` order.
    pub cores: Vec<((u16, u16), VerbStats)>,
    /// Each index opened in this process: its name and statistics.
    pub indexes: Vec<(String, crate::IndexStats)>,
    /// Times each core thread (the sim thread on sim) parked because it had
    /// nothing to do, and times a request or a cross-core wake found it
    /// parked and woke it (each such request paid a thread wake-up).
    pub parks: Vec<u64>,
    pub wakes: Vec<u64>,
}

impl Cluster {
    /// A builder: sim fabric with its defaults, one compute server with one
    /// core, default service tuning.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder {
            fabric: FabricSpec::Sim(SimConfig::default()),
            first_cs: 0,
            cs: 1,
            cores_per_cs: 1,
            total_cs: None,
            service: ServiceConfig::default(),
            lease: None,
        }
    }

    /// Times each core thread parked so far, and times it was woken from
    /// a park (see [`ClusterStats::parks`]).
    pub fn parks_and_wakes(&self) -> (Vec<u64>, Vec<u64>) {
        let rt = self.rt.lock().unwrap_or_else(|p| p.into_inner());
        (rt.parks(), rt.wakes())
    }

    /// `(cs, core)` of each core of this process.
    pub fn cores(&self) -> &[(u16, u16)] {
        &self.cores
    }

    /// Creates the index `name` (1..=32 bytes) with `cfg` and returns a
    /// client for it. Errors: `Catalog` if the name exists (use
    /// [`Cluster::open_index`]) or the catalog is full, `BadConfig` for a
    /// configuration the fabric cannot take (checked before the name is
    /// claimed), a verb error. A create that fails after its claim
    /// (`OutOfMemory` while the root is built) abandons the claim, and the
    /// next create of the name claims it again (`dm_runtime::catalog::
    /// abandon`; the failed create's root-area bytes stay unused). A
    /// process that dies between claim and publish leaves the name busy
    /// until a member of a cluster with a lease takes the claim over.
    pub fn create_index(&self, name: &str, cfg: IndexConfig) -> Result<Client, Error> {
        match self.open_or_create(name, Some(cfg), true)? {
            (c, true) => Ok(c),
            (_, false) => Err(Error::Catalog(format!("index {name:?} exists"))),
        }
    }

    /// Opens the index `name` that this or another process created, with
    /// the kind, key width and node size it was created with (and default
    /// cache sizes). Error: `Catalog` if no index has that name.
    pub fn open_index(&self, name: &str) -> Result<Client, Error> {
        Ok(self.open_or_create(name, None, false)?.0)
    }

    /// Opens `name`, creating it with `cfg` if no process has; `Catalog`
    /// error if it exists with another kind, key width or node size (the
    /// radix family has none: [`IndexConfig::descriptor`]).
    pub fn open_or_create_index(&self, name: &str, cfg: IndexConfig) -> Result<Client, Error> {
        Ok(self.open_or_create(name, Some(cfg), true)?.0)
    }

    fn open_or_create(
        &self,
        name: &str,
        cfg: Option<IndexConfig>,
        create: bool,
    ) -> Result<(Client, bool), Error> {
        if let Some(inst) = self
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
        {
            if let Some(c) = &cfg {
                if c.descriptor() != inst.config().descriptor() {
                    return Err(Error::Catalog(format!(
                        "index {name:?} is {}, not {}",
                        inst.config().describe(),
                        c.describe()
                    )));
                }
            }
            return Ok((self.client(inst.clone()), false));
        }
        if let Some(c) = &cfg {
            c.validate()?;
        }
        let (site, ncores, (cs, core)) = (self.site.clone(), self.cores.len(), self.cores[0]);
        let owned = name.to_string();
        let me = self.member(cs);
        let (inst, created) = self.spawners[0].block_on(move || async move {
            open_on_core(&owned, cfg, create, site, ncores, (cs, core), me).await
        })??;
        for m in self.membership.iter().flat_map(|m| &m.members) {
            inst.adopt_member(m.clone())?;
        }
        let inst = self
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(name.to_string())
            .or_insert(inst)
            .clone();
        Ok((self.client(inst), created))
    }

    fn client(&self, inst: Arc<Instance>) -> Client {
        Client::new(
            inst,
            self.spawners.clone(),
            self.cores.clone(),
            self.site.local_cs.clone(),
        )
    }

    /// CS `cs`'s membership, if the cluster was built with a lease.
    pub fn member(&self, cs: u16) -> Option<Arc<Member>> {
        self.membership
            .as_ref()?
            .members
            .iter()
            .find(|m| m.cs() == cs)
            .cloned()
    }

    /// The catalog's entries (every index of the deployment).
    pub fn catalog(&self) -> Result<Vec<catalog::Entry>, Error> {
        Ok(self.spawners[0].block_on(|| async { catalog::list().await })??)
    }

    /// Stops taking requests (clients get `ShutDown`), lets every operation
    /// already submitted finish, stops the core threads and returns what
    /// the cores and indexes did.
    pub fn shutdown(self) -> ClusterStats {
        let Cluster {
            rt,
            cores,
            open,
            membership,
            ..
        } = self;
        if let Some(mut m) = membership {
            m.stop();
        }
        let rt = rt.into_inner().unwrap_or_else(|p| p.into_inner());
        let (parks, wakes) = (rt.parks(), rt.wakes());
        let stats = rt.shutdown();
        let mut indexes: Vec<_> = open
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .into_iter()
            .map(|(n, i)| (n, i.stats()))
            .collect();
        indexes.sort_by(|a, b| a.0.cmp(&b.0));
        ClusterStats {
            cores: cores.into_iter().zip(stats).collect(),
            indexes,
            parks,
            wakes,
        }
    }
}

/// Most core threads one process starts ([`ClusterBuilder::build`]).
pub const MAX_CORES: u64 = 1024;
/// Most simulated cores one sim cluster runs.
pub const MAX_SIM_CORES: u64 = 16_384;

/// `BadConfig` unless `num_ms` memory servers of `ms` can serve indexes:
/// at least one, chunks of whole 8-byte words and at least 4 KiB (a node
/// of any index fits one), and a region that holds the superblock and one
/// chunk. Without these checks the first allocation failed as a verb on
/// address 0.
pub fn check_ms(num_ms: u16, ms: &dm_verbs::MsConfig) -> Result<(), Error> {
    let sb = dm_verbs::ms::SUPERBLOCK_BYTES;
    if num_ms == 0 {
        return Err(Error::BadConfig("no memory servers (num_ms 0)".into()));
    }
    if ms.chunk_bytes < 4096 || !ms.chunk_bytes.is_multiple_of(8) {
        return Err(Error::BadConfig(format!(
            "chunk_bytes {}: at least 4096, a multiple of 8",
            ms.chunk_bytes
        )));
    }
    if ms.region_bytes < sb + ms.chunk_bytes {
        return Err(Error::BadConfig(format!(
            "region_bytes {} holds no chunk of {} bytes after the {sb}-byte superblock",
            ms.region_bytes, ms.chunk_bytes
        )));
    }
    Ok(())
}

/// On a core: looks `name` up in the catalog; if absent and `create`,
/// claims it, creates the index's root there and publishes it. With the
/// CS's membership `me` (a cluster with a lease), a claim of the name left
/// by a creator that died is taken over (`catalog::claim_as`).
async fn open_on_core(
    name: &str,
    cfg: Option<IndexConfig>,
    create: bool,
    site: Site,
    ncores: usize,
    (cs, core): (u16, u16),
    me: Option<Arc<Member>>,
) -> Result<(Arc<Instance>, bool), Error> {
    let instance = |cfg: IndexConfig, e: &catalog::Entry| {
        Instance::new(name, cfg, site.clone(), Root::Area(e.root_off), ncores).map(Arc::new)
    };
    let cfg = match (cfg, create) {
        (Some(c), true) => c,
        (cfg, _) => {
            let e = catalog::lookup(name)
                .await?
                .ok_or_else(|| Error::Catalog(format!("no index named {name:?}")))?;
            let found = IndexConfig::from_descriptor(e.kind)?;
            let cfg = cfg.unwrap_or(found);
            return Ok((instance(cfg, &e)?, false));
        }
    };
    // The configuration is checked before the claim: a create that fails
    // after it leaves the name claimed (`dm_runtime::catalog`). The
    // instance and this core's handle, on a placeholder root area, run
    // every check that needs no verb.
    let area = Root::Area(dm_verbs::ms::superblock::ROOT_AREAS);
    Arc::new(Instance::new(
        name,
        cfg.clone(),
        site.clone(),
        area,
        ncores,
    )?)
    .open(cs, core, 0)?;
    let tag = ((cs as u64) << 16 | core as u64) + 1;
    let made: std::cell::RefCell<Option<Arc<Instance>>> = Default::default();
    let (kind, bytes) = (cfg.descriptor(), cfg.root_bytes(&site));
    let (entry, created) = catalog::open_or_create_as(name, kind, bytes, tag, me.as_deref(), |e| {
        let r = instance(cfg.clone(), &e);
        let made = &made;
        async move {
            let inst = r?;
            inst.create_root(cs, core).await?;
            *made.borrow_mut() = Some(inst);
            Ok::<(), Error>(())
        }
    })
    .await?;
    let inst = match made.into_inner() {
        Some(i) => i,
        None => instance(cfg, &entry)?,
    };
    Ok((inst, created))
}
