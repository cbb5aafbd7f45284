// day50_gpt/test_options.cpp: defaults that the command line decides from other flags, judged on the host
// (gpt::parse_options, no GPU). The weight gradients' SM share (--dw-sm-share, options.h): 0.5 by default
// where it was measured, bf16's one-GPU graph with the weight gradients on the side stream, and every SM
// elsewhere (--graph off, --dw-stream off, fp32 or tf32, data parallelism); a share given on the command
// line is kept where it is allowed. And --residual (the residual stream's precision): fp32 unless asked; and
// --store-slots (our fused GEMM's staging slots for fc's forward): 4 unless asked, 2 when asked. And
// --chain-priority: auto (chosen by timing, run/trainer.cuh) unless asked, on or off when asked.
#include <string>
#include <vector>

#include "minitest.h"
#include "options.h"

// parse_options on "gpt --data Makefile <args>" (a readable file, so that the files' checks pass), run from
// the lesson's folder as make test runs its host tests.
static gpt::Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"gpt", "--data", "Makefile"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return gpt::parse_options(int(args.size()), argv.data());
}

TEST(half_the_sms_in_bf16s_one_gpu_graph) { EXPECT(parse({}).train.dw_sm_share == kDwSmShareDefault); }
TEST(every_sm_without_the_graph) { EXPECT(parse({"--graph", "off"}).train.dw_sm_share == 1); }
TEST(every_sm_on_one_stream) { EXPECT(parse({"--dw-stream", "off"}).train.dw_sm_share == 1); }
TEST(every_sm_in_fp32_and_tf32) {
  EXPECT(parse({"--precision", "fp32"}).train.dw_sm_share == 1);
  EXPECT(parse({"--precision", "tf32"}).train.dw_sm_share == 1);
}
TEST(every_sm_with_data_parallelism) {
  EXPECT(parse({"--gpus", "2"}).train.dw_sm_share == 1);
  // one process a GPU (launch_ranks.sh): the same rule through --world, not only --gpus
  EXPECT(parse({"--world", "2", "--id-file", "build/test_options.id", "--rank", "1"}).train.dw_sm_share == 1);
}
TEST(a_given_share_is_kept) {
  EXPECT(parse({"--dw-sm-share", "0.75"}).train.dw_sm_share == 0.75);
  EXPECT(parse({"--dw-sm-share", "1"}).train.dw_sm_share == 1);
  EXPECT(parse({"--precision", "fp32", "--dw-sm-share", "0.5"}).train.dw_sm_share == 0.5);
}

// --residual: fp32 unless asked (the default step keeps the stream in fp32); bf16 where it is allowed.
TEST(the_residual_stream_in_fp32_unless_asked) {
  EXPECT(!parse({}).train.residual_bf16);
  EXPECT(parse({"--residual", "bf16"}).train.residual_bf16);
  EXPECT(!parse({"--residual", "fp32"}).train.residual_bf16);
}

TEST(four_staging_slots_unless_asked) {
  EXPECT(parse({}).train.store_slots == 4);
  EXPECT(parse({"--store-slots", "2"}).train.store_slots == 2);
  EXPECT(parse({"--store-slots", "4"}).train.store_slots == 4);
}

TEST(chain_priority_chosen_by_timing_unless_asked) {
  EXPECT(parse({}).train.chain_priority == ChainPriority::kAuto);
  EXPECT(TrainOptions().chain_priority == ChainPriority::kAuto);  // the checks' trainers: the command line's default
  EXPECT(parse({"--chain-priority", "auto"}).train.chain_priority == ChainPriority::kAuto);
  EXPECT(parse({"--chain-priority", "on"}).train.chain_priority == ChainPriority::kOn);
  EXPECT(parse({"--chain-priority", "off"}).train.chain_priority == ChainPriority::kOff);
  // with the graph off it is accepted and changes no result (no graph to instantiate either way)
  EXPECT(parse({"--graph", "off", "--chain-priority", "on"}).train.chain_priority == ChainPriority::kOn);
}

int main() { return minitest::run_all(); }
