// One background thread running posted tasks in order (the prefix cache's block writer: the
// scheduler's saves run here, off every request's path).
#pragma once

#include <fmt/format.h>

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace rocky::runtime {

class TaskQueue {
 public:
  TaskQueue() : thread_([this] { loop(); }) {}
  ~TaskQueue() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();  // the tasks queued so far run first
  }
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;

  void post(std::function<void()> fn) {
    {
      std::lock_guard lk(mu_);
      tasks_.push_back(std::move(fn));
    }
    cv_.notify_all();
  }
  // Returns once every task posted before the call has run.
  void flush() {
    std::unique_lock lk(mu_);
    idle_cv_.wait(lk, [&] { return tasks_.empty() && !running_; });
  }

 private:
  void loop() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping and drained
      std::function<void()> fn = std::move(tasks_.front());
      tasks_.pop_front();
      running_ = true;
      lk.unlock();
      try {
        fn();
      } catch (const std::exception& e) {
        fmt::print(stderr, "rocky: warning: background task: {}\n", e.what());
      }
      lk.lock();
      running_ = false;
      idle_cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::function<void()>> tasks_;
  bool running_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace rocky::runtime
