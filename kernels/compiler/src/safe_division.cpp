// Integer division that never traps.
//
// OpenCL C leaves x / 0, x % 0 and INT_MIN / -1 undefined in value, but a kernel must not
// kill the host process, and x86's idiv raises SIGFPE for exactly those operands. Every
// division whose divisor is not a constant known to be safe gets its divisor replaced by 1
// when the operation would trap: x / 0 then yields x and INT_MIN / -1 yields INT_MIN (the
// wrapped quotient); the remainders become 0. Inserted before optimization, so the optimizer
// never sees the undefined operation and cannot exploit it either.
#include "internal.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>

using namespace llvm;

namespace manycl::compiler::detail {

// A constant divisor none of whose lanes is 0 (nor -1 for a signed division) cannot trap.
static bool isSafeConstantDivisor(Value *divisor, bool isSigned) {
  auto *c = dyn_cast<Constant>(divisor);
  if (!c)
    return false;
  auto safeLane = [&](Constant *lane) {
    auto *ci = dyn_cast_or_null<ConstantInt>(lane);
    return ci && !ci->isZero() && !(isSigned && ci->isMinusOne());
  };
  auto *vt = dyn_cast<FixedVectorType>(c->getType());
  if (!vt)
    return safeLane(c);
  for (unsigned i = 0; i < vt->getNumElements(); ++i)
    if (!safeLane(c->getAggregateElement(i)))
      return false;
  return true;
}

void guardIntegerDivision(Module &M) {
  std::vector<BinaryOperator *> divisions;
  for (Function &F : M)
    for (Instruction &I : instructions(F))
      if (auto *bo = dyn_cast<BinaryOperator>(&I)) {
        switch (bo->getOpcode()) {
        case Instruction::SDiv:
        case Instruction::SRem:
        case Instruction::UDiv:
        case Instruction::URem:
          divisions.push_back(bo);
          break;
        default:
          break;
        }
      }
  for (BinaryOperator *div : divisions) {
    const bool isSigned =
        div->getOpcode() == Instruction::SDiv || div->getOpcode() == Instruction::SRem;
    Value *numerator = div->getOperand(0), *divisor = div->getOperand(1);
    if (isSafeConstantDivisor(divisor, isSigned))
      continue;
    IRBuilder<> B(div);
    Type *type = divisor->getType();
    Value *traps = B.CreateICmpEQ(divisor, Constant::getNullValue(type));
    if (isSigned) {
      unsigned bits = type->getScalarSizeInBits();
      Value *overflow = B.CreateAnd(
          B.CreateICmpEQ(divisor, Constant::getAllOnesValue(type)),
          B.CreateICmpEQ(numerator, ConstantInt::get(type, APInt::getSignedMinValue(bits))));
      traps = B.CreateOr(traps, overflow);
    }
    div->setOperand(1, B.CreateSelect(traps, ConstantInt::get(type, 1), divisor));
  }
}

} // namespace manycl::compiler::detail
