// tools/attncert/block_command.cpp — `attncert block-bound`: read a model directory (or build the seeded
// test model), call lib (block/block_bound.hpp), write the report (report/block.hpp), the figure and the
// optional trajectory dump.  Thin: the library computes every number.
#include "block_command.hpp"

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attncert/block/block_bound.hpp"
#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/io/bounded_input.hpp"
#include "attncert/io/npy.hpp"
#include "attncert/report/block.hpp"
#include "cli_common.hpp"
#include "cli_options.hpp"
#include "drift_command.hpp"

namespace attncert::cli {

namespace {

namespace fs = std::filesystem;

struct block_args {
  std::string model_dir, approx = "float32,bfloat16,top-k:32,random-features:64", format = "text", out, plot, dump;
  std::size_t blocks = 4, width = 64, heads = 4, tokens = 128, depth = 0;
  std::uint64_t seed = 20261204;
  double target_ratio = 10, max_seconds = 0;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// A 2-D .npy as a matrix, or a 1-D one as a vector (input_error naming the file otherwise).
tensor read_array(const fs::path& p, std::size_t dims) {
  tensor t = io::read_npy(p.string());
  if (t.shape.size() != dims)
    throw input_error(one_line(p.string(), 4096) + ": expected a " + std::to_string(dims) + "-D array, got " +
                      std::to_string(t.shape.size()) + "-D");
  return t;
}
matrix<double> read_matrix(const fs::path& p) {
  const tensor t = read_array(p, 2);
  matrix<double> m(static_cast<Eigen::Index>(t.shape[0]), static_cast<Eigen::Index>(t.shape[1]));
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) m(i, j) = t.values[static_cast<std::size_t>(i * m.cols() + j)];
  return m;
}
std::vector<double> read_vector(const fs::path& p, bool optional) {
  if (optional && !fs::exists(p)) return {};
  if (!fs::exists(p)) throw input_error(one_line(p.string(), 4096) + ": missing (the model directory names it)");
  return read_array(p, 1).values;
}

// DIR/model.json {"heads", "blocks", "norm", "activation", "eps", "description"} and DIR/x.npy, DIR/block<b>.<name>.npy.
block::model read_model(const std::string& dir, matrix<double>& x, std::string& description) {
  const fs::path root(dir), mpath = root / "model.json";
  if (!fs::is_directory(root)) throw input_error(one_line(dir, 4096) + ": not a model directory");
  if (!fs::exists(mpath)) throw input_error(one_line(mpath.string(), 4096) + ": missing (a model directory holds model.json)");
  block::model m;
  std::size_t blocks = 0;
  try {
    const auto j = nlohmann::json::parse(io::read_file_bounded(mpath.string()));
    for (const auto& [key, value] : j.items())
      if (key != "heads" && key != "blocks" && key != "norm" && key != "activation" && key != "eps" && key != "description")
        throw input_error(one_line(mpath.string(), 4096) + ": unknown key '" + one_line(key, 80) + "'");
    m.heads = j.at("heads").get<std::size_t>();
    blocks = j.at("blocks").get<std::size_t>();
    m.norm = j.value("norm", "layernorm");
    m.activation = j.value("activation", "gelu_tanh");
    m.eps = j.value("eps", 1e-5);
    description = j.value("description", dir);
  } catch (const nlohmann::json::exception& e) {
    throw input_error(one_line(mpath.string(), 4096) + ": malformed: " + one_line(e.what(), 200));
  }
  if (blocks < 1 || blocks > 1000) throw input_error(one_line(mpath.string(), 4096) + ": blocks must be in [1, 1000]");
  x = read_matrix(root / "x.npy");
  for (std::size_t b = 0; b < blocks; ++b) {
    auto f = [&](const std::string& name) { return root / ("block" + std::to_string(b) + "." + name + ".npy"); };
    auto mat = [&](const std::string& name) {
      if (!fs::exists(f(name))) throw input_error(one_line(f(name).string(), 4096) + ": missing");
      return read_matrix(f(name));
    };
    block::block_weights w;
    w.norm1 = {read_vector(f("norm1_gamma"), false), read_vector(f("norm1_beta"), true)};
    w.norm2 = {read_vector(f("norm2_gamma"), false), read_vector(f("norm2_beta"), true)};
    w.w_q = mat("w_q"), w.w_k = mat("w_k"), w.w_v = mat("w_v"), w.w_o = mat("w_o"), w.w1 = mat("w1"), w.w2 = mat("w2");
    w.b_q = read_vector(f("b_q"), true), w.b_k = read_vector(f("b_k"), true), w.b_v = read_vector(f("b_v"), true);
    w.b_o = read_vector(f("b_o"), true), w.b1 = read_vector(f("b1"), true), w.b2 = read_vector(f("b2"), true);
    m.blocks.push_back(std::move(w));
  }
  return m;
}

void stage_dump(io::output_transaction& tx, const std::string& dir, const block::result& r) {
  const fs::path tmp = tx.stage_directory(dir);
  for (const auto& [name, M] : r.dumps) {
    tensor t;
    t.type = dtype::f8;
    t.shape = {static_cast<std::size_t>(M.rows()), static_cast<std::size_t>(M.cols())};
    for (Eigen::Index i = 0; i < M.rows(); ++i)
      for (Eigen::Index j = 0; j < M.cols(); ++j) t.values.push_back(M(i, j));
    check_deadline();
    io::write_new_file(tmp / (name + ".npy"), io::serialize_npy(t));
  }
}

int run_block_command(const block_args& a, const std::string& command) {
  const deadline_scope budget(a.max_seconds);
  block::request r;
  if (a.model_dir.empty()) {
    if (a.width < 1 || a.width > 4096 || a.heads < 1 || a.tokens < 1 || a.tokens > 8192 || a.blocks < 1 || a.blocks > 64)
      throw input_error("test model: --width in [1, 4096], --heads >= 1, --tokens in [1, 8192], --blocks in [1, 64]");
    r.m = block::random_model(a.blocks, a.width, a.heads, a.seed);
    r.x = block::random_input(a.tokens, a.width, a.seed);
    r.model_description = "seeded test model (seed " + std::to_string(a.seed) + ")";
  } else {
    r.m = read_model(a.model_dir, r.x, r.model_description);
  }
  for (const auto& s : split(a.approx)) r.approximations.push_back(block::parse_approximation(s));
  r.depth = a.depth;
  r.seed = a.seed;
  r.target_ratio = a.target_ratio;
  r.keep_trajectories = !a.dump.empty();
  r.progress = stage_progress("block-bound");
  const block::result res = block::run(r);
  clear_progress();
  command_output out;
  if (!a.plot.empty()) {
    const std::string ext = fs::path(a.plot).extension().string();
    if (ext != ".png" && ext != ".svg") throw input_error("--plot needs a file name ending in .png or .svg");
    stage_figure_image(out.files, a.plot, report::block_bound_figure(res, "block-bound"));
  }
  if (!a.dump.empty()) stage_dump(out.files, a.dump, res);
  std::ostringstream os;
  if (a.format == "json") os << report::block_bound_json(res, command).dump(2) << "\n";
  else if (a.format == "md") report::write_block_bound_markdown(os, res);
  else if (a.format == "csv") report::write_block_bound_csv(os, res);
  else report::write_block_bound_text(os, res);
  out.report(a.out, os.str());
  out.commit();
  return exit_ok;
}

}  // namespace

std::function<int(const std::string& command)> add_block_command(CLI::App& app) {
  auto a = std::make_shared<block_args>();
  auto* c = app.add_subcommand("block-bound",
                               "Carry the article's output bound (§11) through complete transformer blocks and compare it with the "
                               "error an approximate attention really makes.");
  c->footer(
      "The exact model is enclosed in MPFI; the approximate one (every head's attention replaced by the approximation,\n"
      "binary64 elsewhere) has each step's rounding enclosed; per block and stage (norm-1, heads, attention-out, residual-1, norm-2, mlp,\n"
      "block-out) the report gives the measured error max_i ||x^_i - x_i||_2 enclosed, and certified upper bounds of\n"
      "it computed from the approximate model alone (local term: the article's ||A^_i - A_i||_1 max_j ||v_j||_2 plus\n"
      "the kernel's product error, or the direct ||O^_i - (A v)_i||_2), propagated through W_O, the residual, the norms\n"
      "(local Lipschitz bounds at the actual input), the MLP (certified derivative bounds) and the next blocks\n"
      "(proofs/L7-block-bound.md).  The 'stage' column restarts each stage from its measured input error.\n"
      "Approximations: float32, bfloat16 (float32 accumulation, P rounded to bfloat16), linear (elu + 1 features),\n"
      "top-k:K, random-features:M.\n"
      "Without --model: a seeded test model (pre-norm, LayerNorm, GELU, causal, weights in float32).\n"
      "Model directory: model.json {\"heads\": H, \"blocks\": L, \"norm\": \"layernorm\"|\"rmsnorm\", \"activation\":\n"
      "\"gelu_tanh\"|\"silu\"|\"relu\", \"eps\": 1e-5, \"description\": \"...\"}, x.npy (tokens x width, the residual stream\n"
      "entering block 0) and block<b>.<name>.npy for norm1_gamma, norm1_beta, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o,\n"
      "norm2_gamma, norm2_beta, w1, b1, w2, b2 (biases and betas optional; W as y = x W + b).  Python writes one:\n"
      "attncert.block_bound(model, ids, ...).\n"
      "Examples:\n"
      "  attncert block-bound                                  # 4 blocks, width 64, 128 tokens\n"
      "  attncert block-bound --blocks 12 --approx float32,bfloat16 --plot bound.png\n"
      "  attncert block-bound --model DIR --format json --out report.json\n" +
      exit_codes_text({{exit_ok, "computed (the report says where the bound is not within --target-ratio)"}}));
  c->add_option("--model", a->model_dir, "Model directory (model.json, x.npy, block<b>.<name>.npy); default: the test model");
  c->add_option("--approx", a->approx, "Approximations, comma-separated")->capture_default_str();
  c->add_option("--depth", a->depth, "Blocks to run (0: all)")->check(non_negative_integer())->capture_default_str();
  c->add_option("--blocks", a->blocks, "Test model: blocks")->capture_default_str();
  c->add_option("--width", a->width, "Test model: width (model dimension)")->capture_default_str();
  c->add_option("--heads", a->heads, "Test model: heads (dividing the width)")->capture_default_str();
  c->add_option("--tokens", a->tokens, "Test model: tokens")->capture_default_str();
  add_seed_option(c, a->seed, "Seed of the test model and of the random features");
  c->add_option("--target-ratio", a->target_ratio, "The report says where bound / measured exceeds this")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  c->add_option("--plot", a->plot, "Also render the figure (bound and measured error against depth) to FILE.png or FILE.svg")
      ->check(writable_file());
  c->add_option("--dump", a->dump,
                "Also write every stage's enclosures of both models and every kernel output as .npy into DIR (created; "
                "files of the same name replaced)");
  c->add_option("--max-seconds", a->max_seconds, "Stop past this budget (exit 3, nothing written)")->check(seconds_budget());
  add_format_option(c, a->format, {"text", "json", "md", "csv"});
  add_out_option(c, a->out);
  return [c, a](const std::string& command) -> int { return *c ? run_block_command(*a, command) : -1; };
}

}  // namespace attncert::cli
