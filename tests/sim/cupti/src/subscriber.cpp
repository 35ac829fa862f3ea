// The callback API's subset: one subscriber at a time, as the real CUPTI
// (a second cuptiSubscribe is refused with
// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED). Callbacks are accepted and
// never called: the simulated CUPTI produces activity records only.
#include "cupti_state.h"
#include "vgpusim.h"

using vgpusim::cupti::State;

namespace {

// The one subscriber handle there is; its address is all a client sees.
struct SubscriberToken {
} g_subscriber;

CUpti_SubscriberHandle handle() { return reinterpret_cast<CUpti_SubscriberHandle>(&g_subscriber); }

}  // namespace

CUPTI_SIM_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                            void* userdata) {
  if (subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  State& state = State::get();
  std::lock_guard lock(state.mutex);
  if (state.subscribed) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  state.subscribed = true;
  state.callback = callback;
  state.callback_user = userdata;
  *subscriber = handle();
  return CUPTI_SUCCESS;
}

CUPTI_SIM_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                               void* userdata, CUpti_SubscriberParams*) {
  return cuptiSubscribe(subscriber, callback, userdata);
}

CUPTI_SIM_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  State& state = State::get();
  std::lock_guard lock(state.mutex);
  if (!state.subscribed || subscriber != handle()) return CUPTI_ERROR_INVALID_PARAMETER;
  state.subscribed = false;
  state.callback = nullptr;
  state.callback_user = nullptr;
  return CUPTI_SUCCESS;
}

CUPTI_SIM_EXPORT CUptiResult cuptiEnableCallback(uint32_t, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain,
                                                 CUpti_CallbackId) {
  return subscriber == handle() ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

CUPTI_SIM_EXPORT CUptiResult cuptiEnableDomain(uint32_t, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain) {
  return subscriber == handle() ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

// The calling thread's simulated clock: the clock kernel records are on.
CUPTI_SIM_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
  if (timestamp == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *timestamp = vgpusimHostTimeNs();
  return CUPTI_SUCCESS;
}

CUPTI_SIM_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** text) {
  if (text == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (result) {
    case CUPTI_SUCCESS: *text = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *text = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_INVALID_KIND: *text = "CUPTI_ERROR_INVALID_KIND"; break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED: *text = "CUPTI_ERROR_MAX_LIMIT_REACHED"; break;
    case CUPTI_ERROR_QUEUE_EMPTY: *text = "CUPTI_ERROR_QUEUE_EMPTY"; break;
    case CUPTI_ERROR_NOT_SUPPORTED: *text = "CUPTI_ERROR_NOT_SUPPORTED"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: *text = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    default: *text = "CUPTI_ERROR_UNKNOWN"; return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return CUPTI_SUCCESS;
}

// Detaches everything: kinds, callbacks, queued records, the subscriber.
CUPTI_SIM_EXPORT CUptiResult cuptiFinalize() {
  vgpusim::cupti::reset(State::get());
  return CUPTI_SUCCESS;
}
