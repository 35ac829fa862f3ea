// The callback API's subset: one subscriber at a time, as the real CUPTI
// (a second cuptiSubscribe is refused with
// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED). Of the callbacks, only the
// driver domain's for kernel launches are ever called (activity.cpp, at each
// launch); enabling any other is accepted and calls nothing.
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
  state.launch_callbacks.store(0);  // a subscriber's callbacks go with it
  state.driver_domain.store(false);
  return CUPTI_SUCCESS;
}

CUPTI_SIM_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                                 CUpti_CallbackDomain domain, CUpti_CallbackId id) {
  if (subscriber != handle()) return CUPTI_ERROR_INVALID_PARAMETER;
  const std::uint32_t bit = domain == CUPTI_CB_DOMAIN_DRIVER_API ? vgpusim::cupti::launch_callback_bit(id) : 0;
  if (bit == 0) return CUPTI_SUCCESS;
  State& state = State::get();
  if (enable != 0) {
    state.launch_callbacks.fetch_or(bit);
    vgpusim::cupti::attach_kernel_observer();
  } else {
    state.launch_callbacks.fetch_and(~bit);
  }
  return CUPTI_SUCCESS;
}

CUPTI_SIM_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                               CUpti_CallbackDomain domain) {
  if (subscriber != handle()) return CUPTI_ERROR_INVALID_PARAMETER;
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return CUPTI_SUCCESS;
  State& state = State::get();
  state.driver_domain.store(enable != 0);
  if (enable != 0) vgpusim::cupti::attach_kernel_observer();
  return CUPTI_SUCCESS;
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
