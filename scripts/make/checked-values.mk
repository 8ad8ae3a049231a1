# The values a caller gives make (on its command line or in the environment) become words of the
# shell commands the recipes run. None may ever be read as shell code, a glob or an option: each
# is checked here, before any recipe runs, and a value outside its alphabet stops make (exit 2)
# naming the variable. Values are read with $(value ...) and kept unexpanded, so that
# MODEL='$(shell ...)' is refused as text rather than run by make itself.

runfn_empty :=
runfn_space := $(runfn_empty) $(runfn_empty)
runfn_tab := $(runfn_empty)	$(runfn_empty)
define runfn_newline


endef
runfn_lower := a b c d e f g h i j k l m n o p q r s t u v w x y z
runfn_upper := A B C D E F G H I J K L M N O P Q R S T U V W X Y Z
runfn_digits := 0 1 2 3 4 5 6 7 8 9
# A path or a store URL: letters, digits and . _ - / + , = @ : (no space, quote, dollar,
# backtick, semicolon, ampersand, pipe, glob, tilde or backslash).
runfn_path_chars := $(runfn_lower) $(runfn_upper) $(runfn_digits) . _ - / + , = @ :
runfn_path_rule := a path may hold only letters, digits and . _ - / + , = @ :
# A registry name, as register checks it.
runfn_name_chars := $(runfn_lower) $(runfn_digits) . _ -
runfn_name_rule := a model name must match [a-z0-9][a-z0-9._-]* as the registry's names do
runfn_profile_chars := $(runfn_name_chars) $(runfn_upper)
runfn_profile_rule := a cargo profile is a name of letters, digits and . _ -
runfn_count_rule := a count (of rows, parts or ranks) is a whole number
runfn_seeds_rule := seeds are whole numbers separated by spaces
runfn_args_rule := retrain's arguments are NAME=VALUE words of the characters a path may hold

# What is left of $(1) once every character listed in $(2) is removed.
runfn_strip = $(if $(2),$(call runfn_strip,$(subst $(firstword $(2)),,$(1)),$(wordlist 2,$(words $(2)),$(2))),$(1))
# $(1) with tabs and newlines made visible (make's own functions would take them for spaces).
runfn_visible = $(subst $(runfn_newline),!,$(subst $(runfn_tab),!,$(1)))

# Whether variable $(1) came from the caller rather than from this Makefile's defaults.
runfn_given = $(filter command line environment environment override override,$(origin $(1)))

# $(call runfn_check,VAR,CHARS,COUNT,RULE): when the caller gave VAR, its value must be COUNT
# words (one; maybe: one or none; any) made of the characters the variable named CHARS lists,
# none starting with '-'; RULE names the variable whose text says what is allowed.
define runfn_check
ifneq ($$(call runfn_given,$(1)),)
override $(1) := $$(value $(1))
ifneq ($$(call runfn_strip,$$(subst $$(runfn_space),,$$(call runfn_visible,$$(value $(1)))),$$($(2))),)
$$(error $(1) is '$$(value $(1))': $$($(4)); what a caller passes is never read by a shell as code)
endif
ifneq ($$(filter -%,$$(value $(1))),)
$$(error $(1) is '$$(value $(1))': it must not start with '-' (it would read as an option))
endif
ifeq ($(3),one)
ifneq ($$(words $$(value $(1))),1)
$$(error $(1) is '$$(value $(1))': $$($(4)), as one word with no space in it)
endif
endif
ifeq ($(3),maybe)
ifneq ($$(filter-out 0 1,$$(words $$(value $(1)))),)
$$(error $(1) is '$$(value $(1))': $$($(4)), as one word with no space in it)
endif
endif
endif
endef

$(foreach v,MANIFEST RUN_DIR REGISTRY BIN PREFIX STORE,$(eval $(call runfn_check,$(v),runfn_path_chars,one,runfn_path_rule)))
$(foreach v,PREVIOUS EXPLAINED,$(eval $(call runfn_check,$(v),runfn_path_chars,maybe,runfn_path_rule)))
$(eval $(call runfn_check,MODEL,runfn_name_chars,one,runfn_name_rule))
$(foreach v,ROWS PARTS TRAIN_TASKS TRAIN_NODES,$(eval $(call runfn_check,$(v),runfn_digits,one,runfn_count_rule)))
$(eval $(call runfn_check,SEEDS,runfn_digits,any,runfn_seeds_rule))
$(eval $(call runfn_check,BUILD_PROFILE,runfn_profile_chars,one,runfn_profile_rule))
$(eval $(call runfn_check,RETRAIN_ARGS,runfn_path_chars,any,runfn_args_rule))
