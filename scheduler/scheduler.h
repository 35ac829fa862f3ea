// The learned schedule (docs/architecture.md, "The learned schedule"): the
// pager's access feed, which records the step (AccessLog), plans on a
// thread of its own from each timed recording, and follows the plan on the
// launch path — at each operation, the offloads and prefetches the plan
// puts there, when the stream is where the plan was learned.
//
// Nothing depends on the plan for correctness: every operation's units are
// made resident on demand before it runs, so a trigger that is refused,
// late, or made stale by a change of the program costs time, never bytes.
//
// The launch path (accessed) takes no lock and allocates nothing of its
// own; it reads the published trigger table through an atomic pointer.
// Tables are replaced whole; a replaced one is freed once it has been out
// of use for a while (retire()).
//
// Each step kind the stream's detector names (step_kinds.h) has a table of
// its own, kept while the kind is (a few: kKindTables): when the stream
// comes back to a kind, the launch path puts that kind's table in force
// again (one scan of a few pointers, at the kind's first operation), with
// no step on demand to learn it again.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "scheduler/access_log.h"
#include "scheduler/kernel_clock.h"
#include "scheduler/next_use_order.h"
#include "scheduler/plan_trial.h"
#include "scheduler/step_kinds.h"
#include "scheduler/step_times.h"
#include "scheduler/swap_plan.h"
#include "scheduler/trigger_table.h"
#include "vmm/pager_control.h"

namespace vgpumem::scheduler {

enum class Planner { swap, vdnn_all, vdnn_conv };  // VGPUMEM_POLICY auto, vdnn-all, vdnn-conv

class Scheduler final : public vmm::AccessFeed {
 public:
  struct Options {
    Planner planner = Planner::swap;
    AccessLog::Options log;
    LinkModel link;
    std::size_t grace_operations = 1;  // the pager's launch grace (PagerOptions)
    // The pager takes its victims in victim_order() (Pager::set_victim_policy):
    // on demand under a plan then differs from on demand before one, and a
    // trial measures it in turn.
    bool victims_in_order = false;
    // How often the planning thread looks for a new recording.
    std::chrono::milliseconds poll{2};
  };
  // `kernel_clock`, when given, times the kernels of timed steps while it is
  // active (kernel_clock.h); marks on the streams time the rest.
  Scheduler(Options options, vmm::PagerControl& pager, std::function<std::string(CUfunction)> kernel_name,
            KernelClock* kernel_clock = nullptr);
  ~Scheduler() override;  // stops the planning thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  bool accessed(const vmm::AccessRecord& record) noexcept override;
  bool times_kernels_by_launch_id() const noexcept override {
    return kernel_clock_ != nullptr && kernel_clock_->active();
  }
  bool marks_kernel_too(std::uint64_t stream_bit) noexcept override { return log_.marks_kernel_too(stream_bit); }
  // Whether the next operation on `stream_bit`'s stream is to be timed
  // (AccessLog::wants_timing).
  bool wants_timing(std::uint64_t stream_bit) noexcept { return log_.wants_timing(stream_bit); }

  // Stops planning (at exit, before the driver goes away); the last plan
  // stays in force. Idempotent.
  void stop();
  // Plans from the latest timed recording now, on the calling thread, if
  // there is one newer than the last plan's; true if a table was published.
  // (The planning thread calls this; tests may too.)
  bool plan_now();

  const AccessLog& log() const { return log_; }
  // The victim order the plan in force knows (next_use_order.h), for the
  // pager (Pager::set_victim_policy); least recently used while there is
  // none, or the plan's stream is not on it.
  const vmm::VictimPolicy& victim_order() const { return next_use_; }
  // The trace summary's "schedule": the access log's and the plan's.
  nlohmann::json summary() const;

 private:
  // The plan's step at the operation `at` stands at, if that operation is
  // the one the plan has there (counted as followed, or strayed). Inline in
  // accessed(): it is on every launch.
  [[gnu::always_inline]] inline const TriggerTable::Step* step_to_fire(const TriggerTable& table, const StreamPosition& at,
                                                                     const vmm::AccessRecord& record) noexcept;
  // The moves the plan puts at `step`.
  void fire(const TriggerTable& table, const TriggerTable::Step& step) noexcept;
  // The table of the kind `at` is in, put in force in place of `in_force`
  // (another kind's of the same stream), if there is one; else `in_force`.
  const TriggerTable* table_of_kind(const StreamPosition& at, const TriggerTable* in_force) noexcept;
  // The slot of the kind's table (log, lock), or kKindTables.
  std::size_t kind_slot(const void* log, std::uint64_t lock) const;
  void planning_loop();
  IterationProfile profile(const RecordedIteration& iteration, const StepTimes& times);
  void note_timing(const StepTimes& times);
  void learn_leads(const IterationProfile& profile);
  std::vector<std::string> operation_names(const RecordedIteration& iteration);
  const std::string& kernel_name_of(CUfunction function);
  Plan unfit_plan(const RecordedIteration& iteration, const IterationProfile& step, std::uint64_t budget,
                  const LinkModel& link, const Plan& automatic);
  bool measure_trial(const RecordedIteration& iteration, const IterationProfile& step);
  // The way a finished trial of `iteration`'s lock measured fastest, if any.
  std::optional<TrialWay> trial_winner(const RecordedIteration& iteration) const;
  // The margin auto plans with for `iteration`'s lock: the standard one
  // until a trial measured the tighter faster.
  PlanMargin margin_for(const RecordedIteration& iteration) const;
  // Whether auto plans `iteration`'s lock on the link alone: only where a
  // trial measured that plan faster than the one made with the driver work.
  bool link_alone_for(const RecordedIteration& iteration) const;
  // Where auto's plan fits and no trial has run in this lock: measures it,
  // a step each, against the same with a one-chunk margin (where that fits
  // too and is predicted faster, or as fast moving fewer bytes) and against
  // the same planned on the link alone (where moves were planned with the
  // driver work they cost), each where it makes other moves (plan_trial.h).
  // The plan on the link alone goes first where the driver's lane would not
  // bind it: then it is published, and `in_force`, `predicted` and `link`
  // become its.
  void try_alternatives(const RecordedIteration& iteration, const IterationProfile& step, std::uint64_t budget,
                        LinkModel* link, const PrefetchLeads& leads, Plan* in_force, PlanTiming* predicted);
  void publish(std::unique_ptr<TriggerTable> table);
  // Where a launch put a kind's table in force just as it was replaced,
  // the kind's new one goes in force instead.
  void refresh_in_force();

  const Options options_;
  vmm::PagerControl& pager_;
  const std::function<std::string(CUfunction)> kernel_name_;
  AccessLog log_;
  KernelClock* const kernel_clock_;
  std::unique_ptr<KernelSpans> kernel_spans_;  // the planning thread's

  std::atomic<const TriggerTable*> table_{nullptr};  // in force: the kind the stream is in, or was last
  NextUseOrder next_use_{table_};
  // Each kind's table: read by the launch path, written under mutex_.
  static constexpr std::size_t kKindTables = StepKinds::kMaxKinds;
  std::array<std::atomic<const TriggerTable*>, kKindTables> kind_tables_{};

  // (The moves the plan asked for are counted by the pager, moves_made();
  // an operation that followed the plan or strayed from it, per stream:
  // StreamCounts.)

  mutable std::mutex mutex_;  // the planner's state below
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
  std::uint64_t planned_serial_ = 0;
  const void* planned_log_ = nullptr;
  std::uint64_t plans_ = 0;  // also the generation of the table published last
  std::array<std::unique_ptr<TriggerTable>, kKindTables> kind_owned_;  // what kind_tables_ point at
  std::array<std::uint64_t, kKindTables> kind_published_{};           // plans_ when each was published
  struct Retired {
    std::unique_ptr<TriggerTable> table;
    std::chrono::steady_clock::time_point since;
  };
  std::deque<Retired> retired_;
  PrefetchLeads leads_;
  std::map<CUfunction, std::string> kernel_names_;  // the planning thread's: cuFuncGetName once a kernel
  nlohmann::json last_plan_;     // the predicted numbers of the plan in force
  nlohmann::json last_profile_;  // the step it was made from (profile_json.h)
  // The planning thread's: the trial of the ways to run a step no plan fits
  // (plan_trial.h), and the step its candidates were planned on.
  std::unique_ptr<PlanTrial> trial_;
  IterationProfile trial_step_;
  nlohmann::json last_trial_;  // its summary, for the trace
  // Where the timed steps read so far got their times (step_times.h).
  std::string timing_source_;  // of the last one read
  std::size_t timed_steps_read_ = 0, kernels_clocked_ = 0, kernels_marked_ = 0, others_marked_ = 0,
              kernels_missing_ = 0, steps_timed_again_ = 0;
};

}  // namespace vgpumem::scheduler
