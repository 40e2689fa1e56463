#!/bin/sh
# Builds, under DIR, a one-function R package in a local CRAN-style repository (DIR/cran) and a
# one-method gem in a local gem source (DIR/gems): CRAN and rubygems.org are not reachable here.
set -eu
dir=$1
mkdir -p "$dir/rpkg/llmboxr/R" "$dir/cran/src/contrib" "$dir/gem/lib" "$dir/gems/gems"
cd "$dir/rpkg"
cat > llmboxr/DESCRIPTION <<'DESC'
Package: llmboxr
Version: 1.0
Title: Test Package
Description: A test package.
License: MIT
Authors@R: person("A", "B", email = "a@b.c", role = c("aut", "cre"))
DESC
echo 'answer <- function() 42' > llmboxr/R/answer.R
echo 'export(answer)' > llmboxr/NAMESPACE
R CMD build --no-build-vignettes --no-manual llmboxr >/dev/null
mv llmboxr_1.0.tar.gz "$dir/cran/src/contrib/"
Rscript -e "tools::write_PACKAGES('$dir/cran/src/contrib', type = 'source')"
cd "$dir/gem"
echo 'module Llmboxrb; def self.answer; 42; end; end' > lib/llmboxrb.rb
cat > llmboxrb.gemspec <<'SPEC'
Gem::Specification.new do |s|
  s.name = "llmboxrb"
  s.version = "1.0.0"
  s.summary = "test"
  s.authors = ["llmbox"]
  s.files = ["lib/llmboxrb.rb"]
  s.license = "MIT"
end
SPEC
gem build llmboxrb.gemspec >/dev/null 2>&1
cp llmboxrb-1.0.0.gem "$dir/gems/gems/"
gem generate_index -d "$dir/gems" >/dev/null
chmod -R a+rX "$dir"
