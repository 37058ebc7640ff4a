#include <gtest/gtest.h>

#include <cmath>

#include "wan/replication/bandwidth_controller.h"
#include "wan/replication/threshold_schedule.h"

namespace geops::wan {
namespace {

TEST(ThresholdScheduleTest, DecaysAsInverseSqrtDownToTheFloor) {
  Result<ThresholdSchedule> s = ThresholdSchedule::Create({});
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->At(0), 0.01);
  EXPECT_DOUBLE_EQ(s->At(3), 0.005);
  EXPECT_DOUBLE_EQ(s->At(99), 0.001);
  EXPECT_DOUBLE_EQ(s->At(10000), 0.001);  // floor
  EXPECT_DOUBLE_EQ(s->At(-5), 0.01);
  ThresholdOptions flat;
  flat.decay = false;
  flat.initial = 0.02;
  EXPECT_DOUBLE_EQ(ThresholdSchedule::Create(flat)->At(1000), 0.02);
  ThresholdOptions bad;
  bad.floor = -1;
  EXPECT_EQ(ThresholdSchedule::Create(bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(ThresholdScheduleTest, MultiplierScalesAndIgnoresNonsense) {
  ThresholdSchedule s = *ThresholdSchedule::Create({});
  s.set_multiplier(4);
  EXPECT_DOUBLE_EQ(s.At(3), 0.02);
  s.set_multiplier(-1);
  s.set_multiplier(NAN);
  EXPECT_DOUBLE_EQ(s.multiplier(), 4);
}

// Following the workers' half-cosine learning-rate decay (0.1 of the
// initial rate at clock 100 of 101): the cut-off shrinks with the steps.
TEST(ThresholdScheduleTest, FollowsTheLearningRateDecay) {
  ThresholdOptions o;
  o.decay = false;
  o.initial = 0.05;
  o.floor = 0.05;
  o.lr_clocks = 101;
  o.final_lr_ratio = 0.1;
  ThresholdSchedule s = *ThresholdSchedule::Create(o);
  EXPECT_DOUBLE_EQ(s.At(0), 0.05);
  EXPECT_NEAR(s.At(50), 0.05 * 0.55, 1e-12);  // halfway: (1 + 0.1) / 2
  EXPECT_NEAR(s.At(100), 0.005, 1e-12);
  EXPECT_NEAR(s.At(5000), 0.005, 1e-12);      // past the schedule: its last value
  EXPECT_DOUBLE_EQ(s.At(-3), 0.05);
  for (Clock k = 1; k <= 100; ++k) EXPECT_LT(s.At(k), s.At(k - 1)) << "clock " << k;
  s.set_multiplier(2);
  EXPECT_NEAR(s.At(100), 0.01, 1e-12);
  ThresholdOptions to_zero = o;  // a rate that decays to 0
  to_zero.final_lr_ratio = 0;
  ASSERT_TRUE(ThresholdSchedule::Create(to_zero).ok());
  EXPECT_DOUBLE_EQ(ThresholdSchedule::Create(to_zero)->At(100), 0.0);
  ThresholdOptions bad = o;
  bad.final_lr_ratio = 1.5;  // a rate that grows is no decay
  EXPECT_EQ(ThresholdSchedule::Create(bad).status().code(), StatusCode::kInvalidArgument);
  bad.final_lr_ratio = -0.1;
  EXPECT_EQ(ThresholdSchedule::Create(bad).status().code(), StatusCode::kInvalidArgument);
  bad = o;
  bad.lr_clocks = -1;
  EXPECT_EQ(ThresholdSchedule::Create(bad).status().code(), StatusCode::kInvalidArgument);
}

// The settle window takes t(k) linearly to 0 over the training's last
// clocks, whatever else shapes it; before the window nothing changes.
TEST(ThresholdScheduleTest, SettlesToZeroOverTheLastClocks) {
  ThresholdOptions o;
  o.decay = false;
  o.initial = 0.05;
  o.floor = 0.05;
  o.settle_clocks = 10;
  o.last_clock = 100;  // clocks 0..99: the factor falls from 1 at clock 89 to 0 at 99
  ThresholdSchedule s = *ThresholdSchedule::Create(o);
  EXPECT_DOUBLE_EQ(s.At(0), 0.05);
  EXPECT_DOUBLE_EQ(s.At(89), 0.05);
  EXPECT_NEAR(s.At(94), 0.05 * 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(s.At(99), 0.0);
  EXPECT_DOUBLE_EQ(s.At(150), 0.0);
  for (Clock k = 90; k <= 99; ++k) EXPECT_LT(s.At(k), s.At(k - 1)) << "clock " << k;
  ThresholdOptions follow = o;  // with the learning rate: both factors
  follow.lr_clocks = 100;
  follow.final_lr_ratio = 0.1;
  ThresholdSchedule f = *ThresholdSchedule::Create(follow);
  EXPECT_NEAR(f.At(94), 0.05 * f.LearningRateRatio(94) * 0.5, 1e-12);
  ThresholdOptions bad = o;
  bad.settle_clocks = 101;  // longer than the training
  EXPECT_EQ(ThresholdSchedule::Create(bad).status().code(), StatusCode::kInvalidArgument);
  bad.settle_clocks = -1;
  EXPECT_EQ(ThresholdSchedule::Create(bad).status().code(), StatusCode::kInvalidArgument);
}

// A plant where the bytes shipped per second fall as the threshold rises:
// bytes(m) = c / m^alpha.
double Plant(double c, double alpha, double m) { return c / std::pow(m, alpha); }

TEST(BandwidthControllerTest, ConvergesToTheTargetRate) {
  for (double alpha : {0.5, 1.0, 2.0}) {
    for (double c : {1e6, 1e8, 1e10}) {
      BandwidthController bc = *BandwidthController::Create({});
      const double link = 100e6;  // 100 Mbit/s
      const double target = bc.TargetBytesPerSecond(link);
      double rate = 0;
      for (int step = 0; step < 60; ++step) {
        rate = Plant(c, alpha, bc.multiplier());
        bc.Update(rate * 0.5, 0.5, link);
      }
      rate = Plant(c, alpha, bc.multiplier());
      double expect_m = std::pow(c / target, 1.0 / alpha);
      if (expect_m >= 0.01 && expect_m <= 1000) {
        EXPECT_NEAR(rate / target, 1.0, 0.06) << "alpha " << alpha << " c " << c;
      } else {
        // Unreachable targets pin the multiplier at a bound.
        EXPECT_TRUE(bc.multiplier() == 0.01 || bc.multiplier() == 1000) << bc.multiplier();
      }
    }
  }
}

TEST(BandwidthControllerTest, StaysBoundedAndStepsAreLimited) {
  BandwidthControllerOptions o;
  o.min_multiplier = 0.1;
  o.max_multiplier = 10;
  BandwidthController bc = *BandwidthController::Create(o);
  double prev = bc.multiplier();
  for (int i = 0; i < 50; ++i) {
    double m = bc.Update(1e12, 1.0, 1e6);  // hugely over budget
    EXPECT_LE(m, prev * o.max_step * (1 + 1e-12));
    EXPECT_LE(m, 10.0);
    prev = m;
  }
  EXPECT_DOUBLE_EQ(bc.multiplier(), 10.0);
  for (int i = 0; i < 50; ++i) bc.Update(0, 1.0, 1e6);  // idle link
  EXPECT_DOUBLE_EQ(bc.multiplier(), 0.1);
  // Nonsense input changes nothing.
  EXPECT_DOUBLE_EQ(bc.Update(100, 0, 1e6), 0.1);
  EXPECT_DOUBLE_EQ(bc.Update(100, 1, -1), 0.1);
  EXPECT_DOUBLE_EQ(bc.Update(NAN, 1, 1e6), 0.1);
}

TEST(BandwidthControllerTest, HoldsStillInsideTheDeadband) {
  BandwidthController bc = *BandwidthController::Create({});
  double target = bc.TargetBytesPerSecond(8e6);
  EXPECT_DOUBLE_EQ(bc.Update(target * 1.04, 1.0, 8e6), 1.0);
  EXPECT_GT(bc.Update(target * 1.5, 1.0, 8e6), 1.0);
}

TEST(BandwidthControllerTest, RejectsBadOptions) {
  BandwidthControllerOptions o;
  o.target_utilization = 1.5;
  EXPECT_EQ(BandwidthController::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.max_step = 1;
  EXPECT_EQ(BandwidthController::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.initial_multiplier = 1e6;
  EXPECT_NE(BandwidthController::Create(o).status().message().find("initial_multiplier"),
            std::string::npos);
}

}  // namespace
}  // namespace geops::wan
