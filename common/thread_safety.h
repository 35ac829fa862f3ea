// Clang's thread safety analysis (-Wthread-safety): which lock guards
// which state, and which functions need it held, written next to the code
// and checked at compile time by CI's Clang build. Other compilers see
// nothing. The names follow Clang's documentation
// (clang.llvm.org/docs/ThreadSafetyAnalysis.html).
//
// The standard library's mutex and lock types carry no annotations in
// libstdc++, so a lock the analysis is to follow is a Mutex and is taken
// with MutexLock (or UniqueMutexLock where it is let go and taken again).
#pragma once

#include <mutex>

#if defined(__clang__)
#define VGPUMEM_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define VGPUMEM_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) VGPUMEM_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY VGPUMEM_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) VGPUMEM_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) VGPUMEM_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) VGPUMEM_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) VGPUMEM_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) VGPUMEM_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) VGPUMEM_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) VGPUMEM_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) VGPUMEM_THREAD_ANNOTATION(assert_capability(x))
#define NO_THREAD_SAFETY_ANALYSIS VGPUMEM_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace vgpumem {

// Told when a Mutex is taken and let go, by the thread that holds it (a
// simulated driver's clocks charge a wait for the lock: vmm/lock_calendar.h).
class LockObserver {
 public:
  virtual ~LockObserver() = default;
  virtual void acquired() = 0;   // just taken
  virtual void releasing() = 0;  // about to be let go
};

// A std::mutex the analysis can follow.
class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() {
    mutex_.lock();
    if (observer_ != nullptr) observer_->acquired();
  }
  void unlock() RELEASE() {
    if (observer_ != nullptr) observer_->releasing();
    mutex_.unlock();
  }
  bool try_lock() TRY_ACQUIRE(true) {
    if (!mutex_.try_lock()) return false;
    if (observer_ != nullptr) observer_->acquired();
    return true;
  }
  // Set before any thread takes the lock; null: none.
  void observe(LockObserver* observer) { observer_ = observer; }

 private:
  std::mutex mutex_;
  LockObserver* observer_ = nullptr;
};

// Holds a Mutex for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
  ~MutexLock() RELEASE() { mutex_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mutex_;
};

// Holds a Mutex for its scope, and may let it go and take it again
// meanwhile (a wait for others to make room).
class SCOPED_CAPABILITY UniqueMutexLock {
 public:
  explicit UniqueMutexLock(Mutex& mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
  ~UniqueMutexLock() RELEASE() {
    if (held_) mutex_.unlock();
  }
  UniqueMutexLock(const UniqueMutexLock&) = delete;
  UniqueMutexLock& operator=(const UniqueMutexLock&) = delete;
  void lock() ACQUIRE() {
    mutex_.lock();
    held_ = true;
  }
  void unlock() RELEASE() {
    mutex_.unlock();
    held_ = false;
  }

 private:
  Mutex& mutex_;
  bool held_ = true;
};

}  // namespace vgpumem
