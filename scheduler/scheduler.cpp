#include "scheduler/scheduler.h"

#include "common/log.h"
#include "common/thread_name.h"
#include "scheduler/profile_json.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

namespace vgpumem::scheduler {

namespace {

// A replaced table is freed once this long has passed: a launch reads it
// for well under a microsecond.
constexpr auto kRetirement = std::chrono::seconds(1);

// The floor in the summary cuts a long step at this many places each way
// at most: exact enough to read, and quick on the planning thread.
constexpr std::size_t kFloorCuts = 256;

// A prefetch whose user waited longer than this counts as late.
constexpr double kLateNs = 1000;

const char* planner_name(Planner planner) {
  switch (planner) {
    case Planner::swap: return "auto";
    case Planner::vdnn_all: return "vdnn-all";
    case Planner::vdnn_conv: return "vdnn-conv";
  }
  return "auto";
}

// The planner reads timed iterations only: the log need not write down
// the others.
AccessLog::Options timed_only(AccessLog::Options options) {
  options.record_untimed = false;
  return options;
}

}  // namespace

Scheduler::Scheduler(Options options, vmm::PagerControl& pager, std::function<std::string(CUfunction)> kernel_name,
                     KernelClock* kernel_clock)
    : options_(std::move(options)),
      pager_(pager),
      kernel_name_(std::move(kernel_name)),
      log_(timed_only(options_.log), &pager),
      kernel_clock_(kernel_clock),
      kernel_spans_(kernel_clock != nullptr ? std::make_unique<KernelSpans>(*kernel_clock) : nullptr) {
  thread_ = std::thread([this] { planning_loop(); });
}

Scheduler::~Scheduler() {
  stop();
  const TriggerTable* none = nullptr;
  table_.store(none, std::memory_order_release);
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

// ---- the launch path ------------------------------------------------------------------------

const TriggerTable::Step* Scheduler::step_to_fire(const TriggerTable& table, const StreamPosition& at,
                                                  const vmm::AccessRecord& record) noexcept {
  // Not the stream the plan is on (or unseen: another thread held its log).
  if (at.log != table.log) return nullptr;
  if (!at.locked || at.lock != table.lock || at.phase >= table.period()) {
    next_use_.lost();
    return nullptr;
  }
  const TriggerTable::Step& step = table.steps[at.phase];
  if (step.identity != record.identity) {
    // The stream is not where the plan thinks: the detector breaks on the
    // next mismatch, and until then on demand does the work.
    StreamCounts::bump(at.log->counts.strayed);
    next_use_.lost();
    return nullptr;
  }
  StreamCounts::bump(at.log->counts.followed);
  next_use_.at(table, at.phase, record.tick);  // before any room is made by the moves
  return &step;
}

const TriggerTable* Scheduler::table_of_kind(const StreamPosition& at, const TriggerTable* in_force) noexcept {
  for (const std::atomic<const TriggerTable*>& slot : kind_tables_) {
    const TriggerTable* table = slot.load(std::memory_order_acquire);
    if (table == nullptr || table->log != at.log || table->lock != at.lock) continue;
    // (Lost to a publish meanwhile: that one is in force, and this
    // operation goes on demand.)
    return table_.compare_exchange_strong(in_force, table, std::memory_order_acq_rel) ? table : in_force;
  }
  return in_force;
}

bool Scheduler::accessed(const vmm::AccessRecord& record) noexcept {
  const StreamPosition at = log_.follow(record);
  const TriggerTable* table = table_.load(std::memory_order_acquire);
  // The stream is in another kind than the table in force: that kind's, if planned.
  if (table != nullptr && at.locked && at.lock != table->lock && at.log == table->log) [[unlikely]] {
    table = table_of_kind(at, table);
  }
  const TriggerTable::Step* step = table != nullptr ? step_to_fire(*table, at, record) : nullptr;
  // The stream's log goes back before the moves: they touch nothing of it,
  // and may wait for the pager.
  log_.let_go(at);
  if (step == nullptr) return at.time_next;
  if (step->offloads_from != step->offloads_to || step->prefetches_from != step->prefetches_to) fire(*table, *step);
  // What the next operation reads of the table, asked for now (the
  // driver's work in between would leave it a cache miss).
  if (at.phase + 1 < table->period()) __builtin_prefetch(step + 1);
  return at.time_next;
}

void Scheduler::fire(const TriggerTable& table, const TriggerTable::Step& step) noexcept {
  pager_.move_ahead({table.offloads.data() + step.offloads_from, table.offloads.data() + step.offloads_to},
                    {table.prefetches.data() + step.prefetches_from, table.prefetches.data() + step.prefetches_to},
                    table.inside_grace);
}

// ---- planning -------------------------------------------------------------------------------

void Scheduler::planning_loop() {
  name_this_thread("vgpumem-planner");
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, options_.poll, [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    refresh_in_force();
    plan_now();
    lock.lock();
  }
}

IterationProfile Scheduler::profile(const RecordedIteration& iteration, const StepTimes& times) {
  ProfileSources sources;
  sources.time = [&times](std::size_t i, double* duration, double* stall) {
    *duration = times.duration_ns[i];
    *stall = times.stall_ns[i];
  };
  sources.bytes = [this](const vmm::Unit* unit) {
    const vmm::UnitFacts facts = pager_.facts(unit);
    return facts.live ? facts.bytes : 0;  // a unit freed since is nothing to plan for
  };
  // (For auto too: vdnn-conv's plan is one of its candidates where no plan
  // fits, plan_trial.h.)
  if (options_.planner != Planner::vdnn_all) {
    sources.convolution = [this](CUfunction function) {
      std::string name = kernel_name_of(function);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      return name.find("conv") != std::string::npos || name.find("implicit_gemm") != std::string::npos ||
             name.find("wgrad") != std::string::npos || name.find("dgrad") != std::string::npos;
    };
  }
  IterationProfile result = build_profile(iteration, sources);
  result.offload_delay = options_.grace_operations;
  return result;
}

void Scheduler::note_timing(const StepTimes& times) {
  std::lock_guard lock(mutex_);
  timing_source_ = times.source;
  ++timed_steps_read_;
  kernels_clocked_ += times.kernels_clocked;
  kernels_marked_ += times.kernels_marked;
  others_marked_ += times.others_marked;
  kernels_missing_ += times.kernels_missing;
}

// Where the plan in force made a user wait, its prefetches go earlier next
// time by as long as it waited (at most a step).
void Scheduler::learn_leads(const IterationProfile& profile) {
  const std::size_t slot = kind_slot(profile.log, profile.lock);
  if (slot == kKindTables || kind_owned_[slot]->period() != profile.period()) return;
  const TriggerTable& in_force = *kind_owned_[slot];
  const std::size_t period = profile.period();
  for (std::size_t s = 0; s < in_force.plan.swaps.size(); ++s) {
    const PlannedSwap& swap = in_force.plan.swaps[s];
    if (swap.needed_by >= period || swap.no_copy_in) continue;  // no prefetch to move
    const double waited = profile.ops[swap.needed_by].stall_ns;
    if (waited < kLateNs) continue;
    const vmm::Unit* unit = nullptr;
    for (vmm::Unit* prefetched : in_force.prefetches_at(swap.prefetch_at)) {
      const ProfileOp& user = profile.ops[swap.needed_by];
      for (std::uint32_t k = 0; k < user.use_count; ++k) {
        if (profile.units[profile.uses[user.first_use + k]].unit == prefetched) unit = prefetched;
      }
    }
    if (unit == nullptr) continue;
    double& lead = leads_[{unit, swap.needed_by}];
    lead = std::min(lead + waited, profile.step_ns);
  }
}

bool Scheduler::plan_now() {
  const std::shared_ptr<const RecordedIteration> iteration = log_.last_iteration();
  if (iteration == nullptr || !iteration->timed || iteration->ops.empty()) return false;
  {
    std::lock_guard lock(mutex_);
    if (iteration->log == planned_log_ && iteration->serial <= planned_serial_) return false;
    planned_log_ = iteration->log;
    planned_serial_ = iteration->serial;
  }
  const auto began = std::chrono::steady_clock::now();
  const auto ms_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  const StepTimes times = read_step_times(*iteration, &pager_, kernel_spans_.get());
  note_timing(times);
  if (times.kernels_missing > 0 && !times_kernels_by_launch_id()) {
    // The clock stepped aside (a profiler started) during the step: what it
    // never timed would be guessed. The next step is timed with marks.
    log_.request_timing(iteration->log, 0);
    std::lock_guard lock(mutex_);
    ++steps_timed_again_;
    VGPUMEM_LOG_DEBUG("schedule: {} kernels of recorded step {} were never timed (the kernel clock stopped); timing "
                      "another step with events",
                      times.kernels_missing, iteration->serial);
    return false;
  }
  const IterationProfile step = profile(*iteration, times);
  const double profile_ms = ms_since(began);
  if (trial_ != nullptr && trial_->covers(iteration->log, iteration->lock) && !trial_->done()) {
    return measure_trial(*iteration, step);
  }
  const std::uint64_t budget = pager_.paging_budget(step.device);
  // The link as measured on the pager's copies, where it has been.
  LinkModel link = options_.link;
  if (const double out = pager_.link_bytes_per_ns(true); out > 0) link.to_host_bytes_per_ns = out;
  if (const double in = pager_.link_bytes_per_ns(false); in > 0) link.to_device_bytes_per_ns = in;
  // And the driver work around each move, as measured (LinkModel).
  // And the driver work around each move, as measured, unless this lock's
  // trial found the plan made on the link alone faster (LinkModel).
  if (!link_alone_for(*iteration)) {
    link.fetch_driver_ns = pager_.driver_ns_per_move(false);
    link.save_driver_ns = pager_.driver_ns_per_move(true);
  }
  Plan plan;
  PrefetchLeads leads;
  {
    std::lock_guard lock(mutex_);
    learn_leads(step);
    leads = leads_;
    switch (options_.planner) {
      // The greedy plan first: it is ready in milliseconds, and a plan that
      // comes a step late is a step on demand. Refined below.
      case Planner::swap: plan = plan_auto(step, budget, link, leads, /*refine=*/false, margin_for(*iteration)); break;
      case Planner::vdnn_all: plan = plan_vdnn(step, budget, link, false); break;
      case Planner::vdnn_conv: plan = plan_vdnn(step, budget, link, true); break;
    }
  }
  // A plan that cannot bring the step under the cap leaves the rest to the
  // on-demand path, and whether that beats on demand alone is measured, not
  // predicted (plan_trial.h). (vDNN's plans are kept whatever they do: they
  // are the baselines.)
  // Where the launch grace leaves no room for a plan, auto's candidate is
  // its plan with the grace cut as far as it must be, if one then fits
  // (plan_auto_cutting_grace), else its partial plan.
  std::size_t unfit_swaps = 0;
  const bool trial = !plan.fits && options_.planner == Planner::swap;
  if (trial) {
    plan = fit_by_cutting_grace(step, budget, link, leads, std::move(plan));
    const std::size_t auto_swaps = plan.swaps.size();
    plan = unfit_plan(*iteration, step, budget, link, plan);
    if (plan.swaps.empty()) unfit_swaps = auto_swaps;
  }
  // The positions the plan is on: the step's, or with the grace it cut.
  const IterationProfile cut_grace = plan.offload_delay ? profile_for(step, plan) : IterationProfile{};
  const IterationProfile& planned = plan.offload_delay ? cut_grace : step;
  // (A trial's candidates run as they were planned: what is measured is what is kept.)
  const bool refine = options_.planner == Planner::swap && !trial && plan.fits && !plan.swaps.empty();
  Plan greedy = refine ? plan : Plan{};
  publish(std::make_unique<TriggerTable>(make_trigger_table(step, plan)));
  const double published_ms = ms_since(began);
  VGPUMEM_LOG_DEBUG(
      "schedule: plan of {} moves for a step of {} operations published (recorded step {}; {:.1f} ms after it was "
      "taken, {:.1f} ms of them reading its times)",
      plan.swaps.size(), step.period(), iteration->serial, published_ms, profile_ms);
  PlanTiming predicted = simulate(planned, plan, link);
  if (refine) {
    refine_auto_plan(planned, link, leads, &greedy);
    if (const PlanTiming refined = simulate(planned, greedy, link); refined.step_ns < predicted.step_ns) {
      plan = std::move(greedy);
      predicted = refined;
      publish(std::make_unique<TriggerTable>(make_trigger_table(step, plan)));
    }
    try_alternatives(*iteration, step, budget, &link, leads, &plan, &predicted);
  }
  nlohmann::json numbers = {{"period", step.period()},
                            {"compute_ns", step.step_ns},
                            {"recorded_stall_ns", step.stall_ns},
                            {"step_bytes", step.total_bytes},
                            {"budget", plan.budget},
                            {"target", plan.target},
                            {"swaps", plan.swaps.size()},
                            {"peak_after", plan.peak_after},
                            {"fits", plan.fits},
                            {"grace_operations", planned.offload_delay},
                            {"unfit_swaps_dropped", unfit_swaps},
                            {"backward_begins", step.backward_begins},
                            {"predicted_step_ns", predicted.step_ns},
                            {"predicted_stall_ns", predicted.stall_ns},
                            {"floor_ns", step_floor(step, budget, link, kFloorCuts)},
                            {"link_to_host_gbps", link.to_host_bytes_per_ns},
                            {"link_to_device_gbps", link.to_device_bytes_per_ns},
                            {"fetch_driver_us", link.fetch_driver_ns / 1e3},
                            {"save_driver_us", link.save_driver_ns / 1e3},
                            {"profile_ms", profile_ms},
                            {"published_ms", published_ms},
                            {"planning_ms", ms_since(began)}};
  const std::vector<std::string> names = operation_names(*iteration);
  nlohmann::json profiled = profile_to_json(step, &names);
  std::lock_guard lock(mutex_);
  last_plan_ = std::move(numbers);
  last_profile_ = std::move(profiled);
  if (trial_ != nullptr) last_trial_ = trial_->summary();
  return true;
}

namespace {

// `way`'s plan for `step`, given auto's own (partial) plan for it.
Plan plan_for(TrialWay way, const IterationProfile& step, std::uint64_t budget, const LinkModel& link,
              const Plan& automatic) {
  switch (way) {
    case TrialWay::automatic:
    case TrialWay::automatic_one_chunk:
    case TrialWay::automatic_link_alone: return automatic;  // (these trials are of plans that fit)
    case TrialWay::vdnn_all: return plan_vdnn(step, budget, link, false);
    case TrialWay::vdnn_conv: return plan_vdnn(step, budget, link, true);
    case TrialWay::on_demand: break;
  }
  Plan on_demand = automatic;
  on_demand.swaps.clear();
  return on_demand;
}

}  // namespace

// The plan to run where auto's cannot fit: the winner of this lock's trial
// where it has one (planned again from `step` the same way), else a new
// trial's first candidate. On demand was what ran `iteration`: its cost is
// known (unless victims follow the plan's order); auto's partial plan and
// vDNN's are run in turn.
Plan Scheduler::unfit_plan(const RecordedIteration& iteration, const IterationProfile& step, std::uint64_t budget,
                           const LinkModel& link, const Plan& automatic) {
  if (trial_ != nullptr && trial_->covers(iteration.log, iteration.lock) && trial_->done()) {
    return plan_for(trial_->best().way, step, budget, link, automatic);
  }
  std::vector<TrialCandidate> candidates;
  for (const TrialWay way : {TrialWay::on_demand, TrialWay::automatic, TrialWay::vdnn_all, TrialWay::vdnn_conv}) {
    Plan plan = plan_for(way, step, budget, link, automatic);
    if (way == TrialWay::on_demand) {
      // The recorded step ran on demand before any plan: its cost, unless
      // the victims on demand takes come from the plan in force.
      const double measured = options_.victims_in_order ? -1 : step.step_ns + step.stall_ns;
      candidates.push_back({way, std::move(plan), measured});
    } else if (!plan.swaps.empty()) {
      candidates.push_back({way, std::move(plan), -1});
    }
  }
  trial_ = std::make_unique<PlanTrial>(iteration.log, iteration.lock, std::move(candidates));
  trial_step_ = step;
  if (!trial_->done()) trial_->measure_from = log_.request_timing(iteration.log, 1);
  VGPUMEM_LOG_INFO("schedule: no plan fits the step under the cap; trying {} ways of running it, a few steps each",
                   trial_->size());
  return trial_->current().plan;
}

std::optional<TrialWay> Scheduler::trial_winner(const RecordedIteration& iteration) const {
  if (trial_ == nullptr || !trial_->covers(iteration.log, iteration.lock) || !trial_->done()) return std::nullopt;
  return trial_->best().way;
}

PlanMargin Scheduler::margin_for(const RecordedIteration& iteration) const {
  return trial_winner(iteration) == TrialWay::automatic_one_chunk ? PlanMargin::one_chunk : PlanMargin::standard;
}

bool Scheduler::link_alone_for(const RecordedIteration& iteration) const {
  return trial_winner(iteration) == TrialWay::automatic_link_alone;
}

namespace {

// Whether the driver's lane can bind a step run on `plan`: the driver work
// of its moves at least half the link time of its busier direction. Below
// that the copies set the pace and the lane rarely delays one, and a plan
// made with the lane's model, which places each fetch earlier and ranks
// moves by their driver work, moves more bytes than the step needs (the
// bench at --scale 8: ResNet-50 and VGG-16 at half their peak 1.12 and
// 1.24 of the floor with it, 1.05 and 1.11 on the link alone); above it,
// the lane sets the pace (ResNet-50 at full size: 1.33 on the link alone,
// 1.08 with it). Only which plan runs first: the trial measures both.
bool driver_lane_binds(const IterationProfile& step, const Plan& plan, const LinkModel& link) {
  const PlanTiming timing = simulate(step, plan, link);
  const double link_ns = std::max(static_cast<double>(timing.bytes_to_host) / link.to_host_bytes_per_ns,
                                  static_cast<double>(timing.bytes_to_device) / link.to_device_bytes_per_ns);
  const double driver_ns = static_cast<double>(plan.swaps.size()) * (link.fetch_driver_ns + link.save_driver_ns);
  return driver_ns >= 0.5 * link_ns;
}

}  // namespace

void Scheduler::try_alternatives(const RecordedIteration& iteration, const IterationProfile& step,
                                 std::uint64_t budget, LinkModel* link, const PrefetchLeads& leads, Plan* in_force,
                                 PlanTiming* predicted) {
  const Plan& plan = *in_force;
  if (!plan.fits || plan.offload_delay || (trial_ != nullptr && trial_->covers(iteration.log, iteration.lock))) {
    return;
  }
  std::vector<TrialCandidate> candidates;
  candidates.push_back({TrialWay::automatic, plan, -1});  // in force
  Plan tight = plan_auto(step, budget, *link, leads, /*refine=*/true, PlanMargin::one_chunk);
  if (tight.fits && !tight.swaps.empty()) {
    // Predicted faster, or as fast with fewer bytes over the link.
    const PlanTiming tighter = simulate(step, tight, *link);
    const bool better =
        tighter.step_ns < predicted->step_ns ||
        (tighter.step_ns <= predicted->step_ns &&
         tighter.bytes_to_host + tighter.bytes_to_device < predicted->bytes_to_host + predicted->bytes_to_device);
    if (better) candidates.push_back({TrialWay::automatic_one_chunk, std::move(tight), -1});
  }
  // Where moves were planned with the driver work they cost, the same step
  // planned on the link alone: the model of the driver's lane is measured
  // against the run, not trusted (plan_trial.h).
  // It runs first where the lane would not bind it (driver_lane_binds).
  if (link->move_overhead_bytes() > 0) {
    LinkModel alone = *link;
    alone.fetch_driver_ns = alone.save_driver_ns = 0;
    Plan plain = plan_auto(step, budget, alone, leads, /*refine=*/true);
    if (plain.fits && !plain.swaps.empty()) {
      if (driver_lane_binds(step, plain, *link)) {
        candidates.push_back({TrialWay::automatic_link_alone, std::move(plain), -1});
      } else {
        *predicted = simulate(step, plain, alone);
        *in_force = plain;
        *link = alone;
        candidates.insert(candidates.begin(), {TrialWay::automatic_link_alone, std::move(plain), -1});
        publish(std::make_unique<TriggerTable>(make_trigger_table(step, *in_force)));
      }
    }
  }
  if (candidates.size() < 2) return;
  trial_ = std::make_unique<PlanTrial>(iteration.log, iteration.lock, std::move(candidates));
  if (trial_->size() < 2) {  // the others made the same moves
    trial_.reset();
    return;
  }
  trial_step_ = step;
  if (!trial_->done()) trial_->measure_from = log_.request_timing(iteration.log, 1);
  VGPUMEM_LOG_INFO("schedule: measuring auto's plan against {} other{}, a step each", trial_->size() - 1,
                   trial_->size() > 2 ? "s" : "");
}

// A step timed during the trial in progress: if it is the one asked for,
// its cost goes to the candidate in force, and the next candidate (or, once
// all are measured, the fastest) is published, planned on the step the
// trial began from. True if a table was published.
bool Scheduler::measure_trial(const RecordedIteration& iteration, const IterationProfile& step) {
  if (iteration.serial < trial_->measure_from) return false;  // transitional: not measured
  trial_->record(step.step_ns + step.stall_ns);
  if (!trial_->done()) trial_->measure_from = log_.request_timing(iteration.log, 1);
  publish(std::make_unique<TriggerTable>(make_trigger_table(trial_step_, trial_->current().plan)));
  if (trial_->done()) {
    const TrialCandidate& best = trial_->best();
    VGPUMEM_LOG_INFO("schedule: the step runs fastest {}{} ({:.1f} ms a step measured)",
                     best.way == TrialWay::on_demand ? "" : "under the plan of ", trial_way_name(best.way),
                     best.step_ns / 1e6);
  }
  std::lock_guard lock(mutex_);
  last_trial_ = trial_->summary();
  if (last_plan_.is_object()) {
    last_plan_["swaps"] = trial_->current().plan.swaps.size();
    last_plan_["target"] = trial_->current().plan.target;
  }
  return true;
}

// A kernel's name, asked of the driver once (empty if it has none to give).
const std::string& Scheduler::kernel_name_of(CUfunction function) {
  auto [at, added] = kernel_names_.try_emplace(function);
  if (added && kernel_name_) at->second = kernel_name_(function);
  return at->second;
}

// Each operation's kernel name (the API that enqueued it, for a copy or a
// memset), for the trace's profile: what `vgpumem report` shows where the
// program waited. A kernel's name is asked of the driver once.
std::vector<std::string> Scheduler::operation_names(const RecordedIteration& iteration) {
  std::vector<std::string> names;
  names.reserve(iteration.ops.size());
  for (const RecordedOp& op : iteration.ops) {
    if (op.function == nullptr) {
      names.emplace_back(op.api);
      continue;
    }
    const std::string& name = kernel_name_of(op.function);
    names.push_back(name.empty() ? std::string("kernel") : name);
  }
  return names;
}

std::size_t Scheduler::kind_slot(const void* log, std::uint64_t lock) const {
  for (std::size_t k = 0; k < kKindTables; ++k) {
    if (kind_owned_[k] != nullptr && kind_owned_[k]->log == log && kind_owned_[k]->lock == lock) return k;
  }
  return kKindTables;
}

// The table goes to its kind's slot (a kind without one takes a free slot,
// else the one published longest ago: that kind is likely gone, and if it
// comes back it is planned again), and in force if its kind is, or none is.
// A replaced table is retired; it is freed once it has been out of use for
// kRetirement and is not in force (a launch may have put it back in force
// as it was replaced: the planning loop puts its kind's new one there).
void Scheduler::publish(std::unique_ptr<TriggerTable> table) {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  const TriggerTable* in_force = table_.load(std::memory_order_acquire);
  while (!retired_.empty() && now - retired_.front().since > kRetirement && retired_.front().table.get() != in_force) {
    retired_.pop_front();
  }
  table->generation = static_cast<std::uint32_t>(++plans_);
  if (table->generation == 0) table->generation = static_cast<std::uint32_t>(++plans_);  // 0 means none
  std::size_t slot = kind_slot(table->log, table->lock);
  if (slot == kKindTables) {
    slot = 0;
    for (std::size_t k = 0; k < kKindTables; ++k) {
      if (kind_owned_[k] == nullptr) {
        slot = k;
        break;
      }
      if (kind_published_[k] < kind_published_[slot]) slot = k;
    }
  }
  std::unique_ptr<TriggerTable> replaced = std::move(kind_owned_[slot]);
  kind_owned_[slot] = std::move(table);
  kind_published_[slot] = plans_;
  const TriggerTable* published = kind_owned_[slot].get();
  kind_tables_[slot].store(published, std::memory_order_release);
  const bool its_kind_in_force = in_force != nullptr && in_force->log == published->log && in_force->lock == published->lock;
  if (in_force == nullptr || in_force == replaced.get() || its_kind_in_force) {
    table_.compare_exchange_strong(in_force, published, std::memory_order_acq_rel);
  }
  if (replaced != nullptr) retired_.push_back({std::move(replaced), now});
}

void Scheduler::refresh_in_force() {
  std::lock_guard lock(mutex_);
  const TriggerTable* in_force = table_.load(std::memory_order_acquire);
  if (in_force == nullptr) return;
  const std::size_t slot = kind_slot(in_force->log, in_force->lock);
  if (slot != kKindTables && kind_owned_[slot].get() != in_force) {
    table_.compare_exchange_strong(in_force, kind_owned_[slot].get(), std::memory_order_acq_rel);
  }
}

nlohmann::json Scheduler::summary() const {
  nlohmann::json out = log_.summary();
  out["planner"] = planner_name(options_.planner);
  out["operations_followed"] = log_.followed();
  out["operations_strayed"] = log_.strayed();
  const vmm::MoveCounts moves = pager_.moves_made();
  out["scheduled_offloads"] = moves.offloads;
  out["scheduled_prefetches"] = moves.prefetches;
  out["scheduled_refused"] = moves.refused;
  std::lock_guard lock(mutex_);
  out["plans"] = plans_;
  out["plan"] = last_plan_.is_null() ? nlohmann::json::object() : last_plan_;
  if (!last_trial_.is_null()) out["trial"] = last_trial_;
  if (!last_profile_.is_null()) out["profile"] = last_profile_;
  out["timing_source"] = timing_source_.empty() ? "none" : timing_source_;
  out["timing"] = {{"steps_read", timed_steps_read_},
                   {"kernels_clocked", kernels_clocked_},
                   {"kernels_marked", kernels_marked_},
                   {"others_marked", others_marked_},
                   {"marks", 2 * (kernels_marked_ + others_marked_)},
                   {"kernels_missing", kernels_missing_},
                   {"steps_timed_again", steps_timed_again_}};
  return out;
}

}  // namespace vgpumem::scheduler
