#pragma once
// Two descriptors held in reserve for the moment a process runs out. Whatever reports and
// cleans up after an EMFILE needs some: a pipe, opening the job's directories to remove
// them, and the sanitizers' runtime, which checks memory through a pipe (it reported a false
// "invalid vptr" building hyrun's error at the limit without them).
namespace hyrun {

/// Opens the reserve (/dev/null twice) if it is not held; hyrun calls it at start.
void hold_descriptor_reserve();
/// Closes the reserve; SystemError does so for EMFILE and ENFILE before it is built. Later
/// calls do nothing.
void release_descriptor_reserve() noexcept;

}  // namespace hyrun
